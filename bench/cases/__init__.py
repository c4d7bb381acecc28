"""One module per concept, named by the concept's id: ``CASES`` (a list of bench.runner.Case),
``setup``, ``BUILDERS`` and an optional ``check`` (bench/runner.py's module doc)."""
