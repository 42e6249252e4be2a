"""Reading a multipart user data the way cloud-init does (the standard library's email parser, RFC 2046), with the
transfer encoding each part declares undone, so a part whose headers were lost shows up as what the node would run."""

from __future__ import annotations

import email
import email.policy


def parts(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """[(content type, decoded body)] of every leaf part, and the problems found."""
    message = email.message_from_string(text, policy=email.policy.compat32)
    if not message.is_multipart():
        return [], [f"user data is {message.get_content_type()!r}, not a multipart MIME archive"]
    out = []
    problems = []
    for index, part in enumerate(p for p in message.walk() if not p.is_multipart()):
        raw = part.get_payload(decode=True)
        if not isinstance(raw, bytes):
            problems.append(f"part {index}: no payload")
            continue
        try:
            body = raw.decode()
        except UnicodeDecodeError:
            problems.append(f"part {index}: payload is not text once decoded")
            continue
        out.append((str(part.get("Content-Type", "text/plain")), body))
    return out, problems
