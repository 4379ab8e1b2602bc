"""One precedence for a node's recorded status (:func:`reconciler.model.nodestate.recorded_status`):
the annotation (the record) before the label (its projection, which a person may edit); the
lifecycle's sequencing, the metrics and ``node status`` all read it this way."""

from __future__ import annotations

import pytest

from reconciler.model.nodestate import recorded_status, status_key

K = status_key("tune")


@pytest.mark.parametrize(("labels", "annotations", "expected"), [
    ({}, {}, ""),
    ({K: "complete"}, {}, "complete"),
    ({}, {K: "in_progress"}, "in_progress"),
    ({K: "complete"}, {K: "erroring"}, "erroring"),  # an edited label never hides the record
    ({K: ""}, {K: ""}, ""),
    ({status_key("other"): "complete"}, {}, ""),  # another recipe's status
])
def test_annotation_first_then_label(labels: dict[str, str], annotations: dict[str, str], expected: str) -> None:
    assert recorded_status(labels, annotations, "tune") == expected
