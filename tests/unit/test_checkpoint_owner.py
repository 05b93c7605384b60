"""The job a checkpoint belongs to: recorded at a start, another job refused naming both."""

from __future__ import annotations

import pytest

from checkpoints.owner import check_owner, record_owner, recorded
from ingest.errors import ConfigError


def test_a_checkpoint_without_a_record_is_taken_and_recorded(tmp_path):
    """A new checkpoint, or one written before jobs recorded themselves, works as it did."""
    check_owner(str(tmp_path), "joba", ["fake qa"])
    record_owner(str(tmp_path), "joba", ["fake qa"])
    assert recorded(str(tmp_path)) == ("joba", ["fake qa"])


def test_the_same_job_with_a_queue_added_keeps_its_checkpoint(tmp_path):
    record_owner(str(tmp_path), "joba", ["fake qa"])
    check_owner(str(tmp_path), "joba", ["fake qa", "sqs http://q/extra"])
    record_owner(str(tmp_path), "joba", ["fake qa", "sqs http://q/extra"])
    assert recorded(str(tmp_path)) == ("joba", ["fake qa", "sqs http://q/extra"])


@pytest.mark.parametrize(
    ("name", "queues"), [("jobc", ["fake qb"]), ("jobc", ["fake qa"]), ("joba", ["fake qb"])]
)
def test_another_job_is_refused_naming_both_and_deleting_nothing(tmp_path, name, queues):
    record_owner(str(tmp_path), "joba", ["fake qa"])
    with pytest.raises(ConfigError) as err:
        check_owner(str(tmp_path), name, queues)
    text = str(err.value)
    assert text.startswith(f"config key checkpoint: {tmp_path} belongs to job joba (sources: fake qa)")
    assert f"not to this job {name} (sources: {queues[0]})" in text
    assert "remove" not in text and "delete" not in text
    assert recorded(str(tmp_path)) == ("joba", ["fake qa"])
