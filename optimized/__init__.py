"""Fast counterparts of reference/ with the same names and signatures, proven equivalent by the
spec tests and timed by spec_tests/bench."""
from optimized import attention, stopping, sampling  # noqa: F401
