"""NodeWright package format: the agent's ``config.json`` (schema v1) and the files a stage pod gets.

* :mod:`reconciler.packages.config` validates a package directory (or an unpacked image with
  ``/skyhook-package/``) and reports every problem as ``file:line:col``;
* :mod:`reconciler.packages.render` renders, as pure functions, the ConfigMap data of a package
  version (``configmaps/`` files) and the node metadata files (``labels.json``,
  ``annotations.json``, ``packages.json``) the agent reads.
"""
