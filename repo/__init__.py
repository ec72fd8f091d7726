"""The Triton model repository: configs derived from the model, ensembles, a pre-deploy check.

Filled in by the model-repository issue.
"""
