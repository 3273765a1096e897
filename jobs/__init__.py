"""Spark jobs: thin adapters that move DataFrames between Delta tables and cep_core."""
