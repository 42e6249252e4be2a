"""User data as a MIME multi-part archive, pure: the user's document split into parts, and parts written back out.

A document is MIME when it opens with a header block, as upstream reads it: first line `MIME-Version:` or
`Content-Type:` (aws: pkg/providers/amifamily/bootstrap/eksbootstrap.go mimeify, nodeadm.go parseUserData), or any
other header line when the block declares a multipart `Content-Type`. Every header of a part is kept, so a
`Content-Transfer-Encoding: base64` part still decodes on the node (upstream's AL2 merge copies the part header
whole, eksbootstrap.go copyCustomUserDataParts), and each body is kept byte for byte.
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass
from email import message as email_message

BOUNDARY = "//"
NODEADM_CONTENT_TYPE = "application/node.eks.aws"
SHELL_CONTENT_TYPE = 'text/x-shellscript; charset="us-ascii"'

_HEADER_LINE = re.compile(r"^[!-9;-~]+:")
"""An RFC 5322 header field: printable name characters but ':', then ':'."""
_OPENING_HEADERS = ("mime-version:", "content-type:")


class MimeError(ValueError):
    """The document looks like MIME but is not a multipart archive a node can read."""


@dataclass(frozen=True, slots=True)
class Part:
    """One part: its headers in the user's order (Content-Type among them) and its undecoded body."""

    headers: tuple[tuple[str, str], ...]
    body: str

    @property
    def content_type(self) -> str:
        return next((v for k, v in self.headers if k.lower() == "content-type"), "")


def part(content_type: str, body: str) -> Part:
    return Part(headers=(("Content-Type", content_type),), body=body)


def is_mime(text: str) -> bool:
    """True when `text` opens with a MIME header block (see the module docstring)."""
    stripped = text.lstrip()
    first = stripped.split("\n", 1)[0]
    if not _HEADER_LINE.match(first):
        return False
    if first.lower().startswith(_OPENING_HEADERS):
        return True
    parsed = email.message_from_string(stripped, policy=email.policy.compat32)
    return parsed.get_content_maintype() == "multipart"


def split(text: str) -> list[Part]:
    """The top-level parts of a multipart document; a nested multipart part stays one part, as upstream copies it."""
    parsed = email.message_from_string(text.lstrip(), policy=email.policy.compat32)
    if not parsed.is_multipart():
        raise MimeError(f"the MIME document is {parsed.get_content_type()!r}, not multipart")
    if not parsed.get_boundary():
        raise MimeError("the multipart Content-Type has no boundary")
    parts = []
    for index, sub in enumerate(parsed.get_payload()):
        if not isinstance(sub, email_message.Message):
            raise MimeError(f"part {index} is not a MIME entity")
        parts.append(Part(headers=tuple((k, str(v)) for k, v in sub.items()), body=_body(sub)))
    return parts


def _body(sub: email_message.Message) -> str:
    if not sub.is_multipart():
        payload = sub.get_payload()
        return payload if isinstance(payload, str) else ""
    # A nested archive: its body as written, found after the blank line that ends its own headers.
    rendered = sub.as_string()
    return rendered.split("\n\n", 1)[1] if "\n\n" in rendered else ""


def serialize(parts: list[Part]) -> str:
    """The archive text (not base64), boundary `//`, as upstream's mime.Archive Serialize lays it out."""
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"', ""]
    for entry in parts:
        lines.append(f"--{BOUNDARY}")
        lines += [f"{k}: {v}" for k, v in entry.headers]
        lines += ["", entry.body]
    lines += [f"--{BOUNDARY}--", ""]
    return "\n".join(lines)
