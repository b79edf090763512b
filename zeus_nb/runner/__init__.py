"""The machinery that runs things for the notebooks and the command line.

``notebooks`` finds the shipped notebooks and runs one headless, ``execute`` is the one papermill
runner behind ``zeus-nb tour``, ``sweep`` and ``course`` (``kernels`` forks its kernels from a
process that imported the heavy modules once), ``records`` keeps each notebook's key
results, ``setup`` is the call at the top of every notebook, ``paths`` says where the notebooks
are. ``sweep`` runs resumable live (batch size, power limit) sweeps, on Dask workers through
``cluster``, ``points`` (the work items) and ``workers`` (worker plugins) when given an executor.
"""
