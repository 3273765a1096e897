"""lakecep: the pipeline around cep_core (configuration, CLI, data generator).

Spark code lives in ``jobs``; the pure CEP engine in ``cep_core``.
"""

__version__ = "0.1.0"
