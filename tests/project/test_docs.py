"""The documentation, API reference included, builds with mkdocs in strict mode (any warning fails)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_docs_build_strictly_with_the_api_reference(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    protocol = (site / "api" / "protocol" / "index.html").read_text()
    assert 'id="ppl_models.inference.protocol.SequenceModel"' in protocol  # rendered from the docstrings
    assert ":class:" not in protocol  # Sphinx roles shown as code (docs/hooks/sphinx_roles.py)
    models = (site / "api" / "models" / "index.html").read_text()
    import ppl_models

    for cls in ppl_models.COLLECTION:  # every class of the collection has its entry
        assert f'id="{cls.__module__}.{cls.__name__}"' in models, cls.__name__
