"""The HTML pages ralph writes (`ralph report`, `ralph bench --html`), from the Jinja2 templates
in templates/. Autoescape is on for every template and every value, SVG text and attributes
included: a lap's text reaches a page only escaped, with no escape call for a writer to forget."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jinja2


def render(template: str, **values: object) -> str:
    """`template` filled in with `values`: numbers and text as they are, structure as Python
    values; the template decides every tag and escapes every value."""
    return _environment().get_template(template).render(**values)


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2  # here, not at the top: `ralph --help` and the commands that write no page never load it

    # autoescape=True, not select_autoescape: by file name, a template not named .html would
    # not be escaped. StrictUndefined: a misspelt name fails the render instead of showing nothing.
    return jinja2.Environment(
        loader=jinja2.PackageLoader("ralph.show"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
