"""pytest plugin: runs the conformance suite against `--impl TARGET`."""
