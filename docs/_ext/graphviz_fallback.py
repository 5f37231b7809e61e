"""Stand-in for ``sphinx.ext.graphviz`` when the Graphviz ``dot`` program is not installed.

It accepts the same ``.. graphviz::`` directive (inline DOT source, ``:caption:``, ``:alt:``,
``:align:``) and shows the DOT source as a highlighted code block instead of a picture. The build
log says so once, as an info line, so a machine without graphviz builds the site with no warning
and nobody is misled about why the pictures are text.
"""

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)


class GraphvizAsSource(SphinxDirective):
    has_content = True
    required_arguments = 0
    optional_arguments = 1  # a file name: not supported here, reported as an error
    option_spec = {
        "caption": directives.unchanged,
        "alt": directives.unchanged,
        "align": directives.unchanged,
        "name": directives.unchanged,
        "class": directives.class_option,
        "layout": directives.unchanged,
    }

    def run(self):
        if self.arguments:
            raise self.error("graphviz_fallback supports inline DOT source only")
        source = "\n".join(self.content)
        block = nodes.literal_block(source, source, language="dot")
        self.set_source_info(block)
        caption = self.options.get("caption")
        if not caption:
            return [block]
        container = nodes.container("", literal_block=True, classes=["literal-block-wrapper"])
        parsed, _ = self.state.inline_text(caption, self.lineno)
        container += nodes.caption(caption, "", *parsed)
        container += block
        return [container]


def _announce(app):
    logger.info(
        "graphviz_fallback: the Graphviz 'dot' program was not found, so the pictures are "
        "shown as DOT source (install graphviz to render them as SVG)"
    )


def setup(app):
    app.add_directive("graphviz", GraphvizAsSource)
    app.connect("builder-inited", _announce)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
