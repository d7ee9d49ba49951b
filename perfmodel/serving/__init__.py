"""A request under load: batching physics, the scheduler simulation, queueing. Imports only perfmodel.core."""
