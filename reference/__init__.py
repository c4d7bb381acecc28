"""The specification: one module per concept, plain PyTorch, written to be read.

Signatures and docstrings here ARE the contract an implementation provides (see docs/).

This package imports none of its modules and lists no concepts (the registry discovers them from
``spec_tests/*/__init__.py``): import the module you need, ``import reference.attention``.
"""
