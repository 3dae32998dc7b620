"""One module per framework; each has ``version()`` and ``make(workload, inputs)``.

``make`` returns ``run``: a callable doing one timed unit (forward and backward;
for mlp and cnn also the SGD update) and returning the gradients (in the order of
``workloads.GRAD_NAMES``) as the framework's arrays; for hessian and jacobian the whole
matrix, for per_example the per-example gradients stacked row by row. The first call
computes them at the initial parameters, which the runner checks against numpy-manual.
A pair a framework cannot compute is declared in ``benchmarks._worker.UNSUPPORTED``.
"""
