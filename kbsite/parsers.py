"""The API's JSON parser: UTF-8 only, and a limit on how deeply the body may nest.

Python's json module recurses once per level: a body of a few thousand nested brackets raised
RecursionError, a 500. The nesting is measured first, on the raw text, so such a body is a 400
that says why, and nothing downstream (validation, rendering) ever meets a deep structure.
"""

import json
import re

from rest_framework import exceptions, parsers

# No request the API accepts nests more than a few levels; this leaves plenty of room.
MAX_DEPTH = 64

# A JSON string (skipped whole, so brackets inside it do not count) or one bracket.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def json_depth_exceeds(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether arrays and objects in `text` nest more than `limit` levels deep."""
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


class JSONParser(parsers.JSONParser):
    """JSON that says plainly when the body is not UTF-8 or nests too deeply."""

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise exceptions.ParseError(
                f"The request body is not UTF-8 text (byte {error.start} is invalid).",
                code="not_utf8",
            ) from None
        if json_depth_exceeds(text):
            raise exceptions.ParseError(
                f"The JSON body nests arrays and objects more than {MAX_DEPTH} levels deep.",
                code="too_deep",
            )
        try:
            return json.loads(text) if text.strip() else {}
        except ValueError as error:
            raise exceptions.ParseError(f"The body is not valid JSON: {error}.") from None
