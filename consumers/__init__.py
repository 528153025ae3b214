"""Process wiring for certmon: sources (file, Kafka), sinks, CLI."""
