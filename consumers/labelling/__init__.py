"""Closing the label loop: a runnable labeller and adapters for labelling tools' webhooks.

- :mod:`.labeller`: answers certmon's label requests (JSONL files or the Kafka requests topic)
  with label events, through a pluggable answer function;
- :mod:`.webhooks`: turns Label Studio (``ANNOTATION_CREATED``) and Argilla
  (``response.created`` / ``record.completed``) webhook payloads into label events.

The protocol (request and label formats, matching, duplicates, late and missing labels) is
``docs/label-loop.md``.
"""
