from pathlib import Path

import pytest

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


@pytest.fixture(scope="session")
def kth_slice(tmp_path_factory) -> Path:
    """The SWF header and first 1,500 jobs of KTH-SP2 (real data, small enough for tests)."""
    lines = (TRACES / "KTH-SP2.swf").read_text().splitlines()
    header = [line for line in lines if line.startswith(";")]
    jobs = [line for line in lines if line.strip() and not line.startswith(";")][:1500]
    path = tmp_path_factory.mktemp("traces") / "kth-1500.swf"
    path.write_text("\n".join(header + jobs) + "\n")
    return path
