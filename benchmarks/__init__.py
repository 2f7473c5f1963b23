"""Scale and peer benchmarks: ``python -m benchmarks [name ...]`` runs every ``bench_*.py`` module's ``main()``."""
