"""Code the tests, benchmarks and developer scripts use that is not itself a test.

Nothing here ships in the certmon wheel (the packages are ``monitor`` and ``consumers``).

- :mod:`tests.support.processes`: free ports, starting and stopping subprocesses (``certmon``,
  Prometheus, Alertmanager, brokers), waiting for a port, an HTTP endpoint or a condition;
- :mod:`tests.support.kafka_broker`, :mod:`tests.support.kafka_broker_cli`: a real Apache Kafka
  broker from Maven Central jars (``scripts/kafka-broker.sh`` runs the CLI);
- :mod:`tests.support.tansu_broker`: the last-resort Tansu broker of the Kafka fixtures;
- :mod:`tests.support.plugin_batch`: many ``plugin_up`` e-processes vectorized over streams
  (Monte Carlo tests and ``benchmarks/labels_vs_oracle.py``);
- :mod:`tests.support.comparison_rounds`, :mod:`tests.support.comparison_batch`: vectorized
  synthetic comparison rounds and the comparison e-process vectorized over streams (Monte Carlo
  tests and ``benchmarks/comparison.py``);
- :mod:`tests.support.metrics_reference`: the sample-by-sample state collector the text
  renderer must reproduce byte for byte (``tests/test_metrics_render.py``).

Benchmarks run as ``python benchmarks/x.py`` put the repository root on ``sys.path`` first.
"""
