"""One module per framework; each has ``version()`` and ``make(workload, inputs)``.

``make`` returns ``run``: a callable doing one timed unit (forward and backward;
for mlp and cnn also the SGD update) and returning the gradients (in the order of
``workloads.GRAD_NAMES``) as the framework's arrays. The first call computes the
gradients at the initial parameters, which the runner checks against numpy-manual.
"""
