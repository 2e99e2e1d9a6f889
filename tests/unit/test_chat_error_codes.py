"""Every code the chat path raises a `ChatError` with is in the code table
(deployments/ingress/chat/errors.py `CODES`): a code missing there answers 500 instead of the
4xx it means, silently."""

from __future__ import annotations

import re
from pathlib import Path

from deployments.ingress.chat.errors import CODES

ROOT = Path(__file__).resolve().parents[2]
RAISED = re.compile(r'ChatError\(\s*"([a-z_]+)"')


def test_every_raised_code_has_a_status() -> None:
    raised = {m.group(1): str(path.relative_to(ROOT))
              for path in (ROOT / "deployments").rglob("*.py")
              for m in RAISED.finditer(path.read_text())}
    assert len(raised) >= 20, raised  # the scan finds the chat path's codes
    missing = {code: where for code, where in raised.items() if code not in CODES}
    assert not missing, missing
