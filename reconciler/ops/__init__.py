"""Operations on a running fleet, outside a rollout: the logic behind the operations verbs.

An application layer between ``execute`` and ``cli`` (docs/architecture-layers.md): it works on
ports only and never imports ``adapters``; ``cli`` opens the cluster and passes it in.

* :mod:`reconciler.ops.patches`: a node or ConfigMap change as data (printed exactly by
  ``--dry-run``) and its conditional write with re-read on conflict;
* :mod:`reconciler.ops.nodeops`: ``node ignore|unignore``, ``node reset``, ``reset``,
  ``package rerun`` as pure node → patch functions;
* :mod:`reconciler.ops.controls`: per-recipe ``pause``/``disable`` switches in a ConfigMap;
* :mod:`reconciler.ops.migrate`: ``import`` of NodeWright/Skyhook node state;
* :mod:`reconciler.ops.logs`: best-effort lookup of stage pod logs.
"""
