"""The generators of the pages under docs/ that are read from the code (scripts/gen-reference).

Each page is a function returning its text; :data:`PAGES` maps the page's path under docs/ to it.
"""

from __future__ import annotations

from refgen.cli import EXIT_MEANINGS, cli_page, documented, exit_codes, exit_codes_page, subparsers
from refgen.common import _md_keep_code
from refgen.fields import _models_in, policy_page, recipe_page
from refgen.keys import KEYS, node_keys_page
from refgen.lifecycle import lifecycle_page, transitions
from refgen.vocabulary import MEANINGS, metric_families, metrics_page, vocabularies, vocabulary_page

PAGES = {
    "reference/cli.md": cli_page,
    "reference/exit-codes.md": exit_codes_page,
    "reference/recipe.md": recipe_page,
    "reference/policy.md": policy_page,
    "reference/node-keys.md": node_keys_page,
    "reference/vocabulary.md": vocabulary_page,
    "reference/metrics.md": metrics_page,
    "explanation/lifecycle.md": lifecycle_page,
}

__all__ = ["EXIT_MEANINGS", "KEYS", "MEANINGS", "PAGES", "_md_keep_code", "_models_in", "cli_page", "documented",
           "exit_codes", "exit_codes_page", "lifecycle_page", "metric_families", "metrics_page", "node_keys_page",
           "policy_page", "recipe_page", "subparsers", "transitions", "vocabularies", "vocabulary_page"]
