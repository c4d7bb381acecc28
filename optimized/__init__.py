"""Fast counterparts of reference/ with the same names and signatures, proven equivalent by the
spec tests and timed by the benchmarks in bench/.

Like ``reference``, this package imports none of its modules: ``import optimized.sampling``."""
