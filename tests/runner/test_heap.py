"""runner.heap.loading: the cyclic collector is off inside the block, its earlier state is back
after it (an error inside included), and what the block made is frozen out of later collections."""

import gc

import pytest

from runner.heap import loading


@pytest.fixture
def collector():
    """Leave the collector and the permanent generation as the test found them."""
    on = gc.isenabled()
    yield
    gc.unfreeze()
    (gc.enable if on else gc.disable)()


@pytest.mark.parametrize("before", [True, False])
def test_off_inside_then_restored_and_frozen(collector, before):
    (gc.enable if before else gc.disable)()
    gc.unfreeze()
    with loading():
        assert not gc.isenabled()
        made = [[] for _ in range(1000)]   # 1,000 new containers, tracked by the collector
    assert gc.isenabled() is before
    # every object alive at the block's end is now in the permanent generation: at least the
    # 1,000 lists made inside it and the list holding them
    assert gc.get_freeze_count() >= len(made) + 1


def test_restored_after_an_error(collector):
    gc.enable()
    with pytest.raises(ValueError):
        with loading():
            raise ValueError("boom")
    assert gc.isenabled()


def test_tracking_client_opens_under_loading(collector, mlflow_uri):
    """runner.tracking opens a store's client (and imports MLflow) inside ``loading``: the
    collector is off while it does (seen by a hook on the client's constructor) and on again
    after, with what it loaded frozen."""
    from mlflow.tracking import MlflowClient

    from runner import tracking

    gc.enable()
    gc.unfreeze()
    seen = []
    orig = MlflowClient.__init__

    def init(self, *a, **k):
        seen.append(gc.isenabled())
        orig(self, *a, **k)

    MlflowClient.__init__ = init
    try:
        client = tracking.client(mlflow_uri)
    finally:
        MlflowClient.__init__ = orig
        tracking._client.cache_clear()
    assert seen == [False]
    assert gc.isenabled() and gc.get_freeze_count() > 0
    assert client.search_experiments(max_results=1) is not None
