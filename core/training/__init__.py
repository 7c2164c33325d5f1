"""Training the shipped model: corpus builder, PyTorch mirror of core.model, trainer, evaluation.

Only torch_model.py and trainer.py import torch; the corpus and evaluation run on NumPy alone.
"""
