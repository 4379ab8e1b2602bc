"""The git adapters: a repository (pygit2) and the controller's fetched recipe source."""
