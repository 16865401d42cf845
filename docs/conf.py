"""Sphinx's configuration for the docs site: myst-nb reads the pages staged by docs/pages.py (`_pages/`), runs them
in a Jupyter kernel through jupyter-cache, and sphinx-book-theme lays them out. Built by `bash tools/docs.sh`."""
import hashlib, os, re, sys
from pathlib import Path
from docutils import nodes
from docutils.transforms import Transform
from latex2mathml.converter import convert

root = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))   # for `conf.pandoc_id` below
project, author, copyright = 'fastaccum', 'fastaccum developers', 'fastaccum developers'
html_title = 'fastaccum'
html_baseurl = 'https://fastaccum.github.io/fastaccum/'
extensions = ['myst_nb', 'sphinx.ext.githubpages', 'sphinx_copybutton']   # githubpages: a .nojekyll, so GitHub Pages serves _static/
# a copy button on each code cell and code block, none on outputs (those in `div.cell_output`: printed text, show_doc's signatures);
# what it copies leaves out prompts (`>>> `, `... `, `$ `) and doctest output lines
copybutton_selector = 'div.highlight > pre:not(.cell_output pre)'
copybutton_prompt_text, copybutton_prompt_is_regexp = r'>>> |\.\.\. |\$ ', True
copybutton_exclude = '.linenos, .gp, .go'
exclude_patterns = ['.jupyter_cache', 'jupyter_execute']

html_theme = 'sphinx_book_theme'
html_theme_options = {'repository_url': 'https://github.com/fastaccum/fastaccum', 'use_repository_button': True,
                      'use_download_button': False, 'use_fullscreen_button': False,
                      'show_toc_level': 2, 'home_page_in_toc': True, 'navbar_persistent': []}
html_static_path = ['_static']
html_css_files = ['site.css']
html_copy_source = html_show_sourcelink = False
html_math_renderer = 'mathml'   # maths drawn by the browser: no script, nothing from the network

# Pages run in a kernel; jupyter-cache keeps their outputs while their code and what they read are unchanged: the
# cache's folder is named after the library, bench/ (results the pages show) and the scripts in nbs/ (run by pages)
def _digest(*files):
    h = hashlib.sha1()
    for f in sorted(f for f in files if f.is_file() and '__pycache__' not in f.parts):
        h.update(str(f.relative_to(root)).encode() + f.read_bytes())
    return h.hexdigest()[:12]
nb_execution_mode = 'cache'
nb_execution_cache_path = os.environ.get('FASTACCUM_DOCS_CACHE') or str(   # tools/docs.sh sets it for the whole build
    root/'.jupyter_cache'/_digest(*(root/'fastaccum').rglob('*'), *(root/'bench').rglob('*'), *(root/'nbs').rglob('*.py')))
nb_execution_timeout = 900
nb_execution_raise_on_error = False   # a failing page shows its traceback, which the check reports
nb_merge_streams = True
nb_render_markdown_format = 'myst'   # show_doc's tables
myst_enable_extensions = ['dollarmath']
myst_heading_anchors = 4

def pandoc_id(text):
    "The id pandoc (so Quarto, and nbdev's links) gives a heading: `## What's next?` -> `whats-next`"
    text = re.sub(r'[^\w\s.-]', '', text.strip().lower())
    return re.sub(r'^[^a-z]+', '', re.sub(r'\s+', '-', text))
myst_heading_slug_func = 'conf.pandoc_id'

def _math(block):
    def visit(self, node):
        self.body.append(convert(node.astext(), display='block' if block else 'inline'))
        raise nodes.SkipNode
    return visit, None

ATTRIBUTES = re.compile(r'\{target=\S*_blank[^}]*\}')   # as the typographer left it: {target=”_blank” style=”...”}

class QuartoLeftovers(Transform):
    """What nbdev's show_doc writes for Quarto, as docutils would show it: the rule above each entry (docutils allows
    none inside an output, and warns) and its source link's `{target="_blank" style="..."}` (shown as text): dropped"""
    default_priority = 500   # before docutils' own Transitions (830), which would warn about each rule
    def apply(self):
        for rule in list(self.document.findall(nodes.transition)):
            if not isinstance(rule.parent, (nodes.section, nodes.document)): rule.parent.remove(rule)
        for text in list(self.document.findall(nodes.Text)):
            if ATTRIBUTES.search(text): text.parent.replace(text, nodes.Text(ATTRIBUTES.sub('', text)))

def setup(app):
    app.add_transform(QuartoLeftovers)
    app.add_html_math_renderer('mathml', _math(False), _math(True))
