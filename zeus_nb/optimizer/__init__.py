"""Optimizers that tune the GPU power limit and the batch size of training jobs."""
