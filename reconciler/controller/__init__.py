"""``reconciler controller``: the long-running mode (issue 15).

One decision thread applies the desired state (NodeRecipe objects, or a mounted directory)
through the application service (:func:`reconciler.service.apply_recipes`, which carries every
safety check) whenever something that matters changes: a recipe (spec, release), a node that
joins or whose selection changes, a control switch (``reconciler pause``/``resume``/``disable``).
Changes arrive from watches (one LIST, then watch: :mod:`reconciler.adapters.kube.informer`),
are reduced to "a pass is needed" by pure rules (:mod:`.triggers`) and queued (:mod:`.workqueue`).

Modules: :mod:`.triggers` (which events need a pass, pure), :mod:`.workqueue` (coalescing
queue), :mod:`.stopping` (SIGTERM and preemption: a stop signal that fences writes and wakes
waits), :mod:`.leader` (leader election on a Lease), :mod:`.source` (desired state),
:mod:`.recipestatus` (kstatus status of NodeRecipe objects, as an observer of the service),
:mod:`.metrics` (Prometheus), :mod:`.loop` (the controller itself). Only ``reconciler.adapters``
talks to the cluster; the CLI verb (:mod:`reconciler.cli.controller`) wires them together.
"""
