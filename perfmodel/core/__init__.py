"""The model of one step: specs, catalog, hardware, engines, efficiencies, ops, roofline, memory, parallelism, request times. Imports nothing above it."""
