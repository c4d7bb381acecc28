# Registers the inferspec pytest plugin (--impl, --concept, --report-json, the report) for any
# pytest run from this repository.
pytest_plugins = ["conformance.plugin"]
