"""The docs site in `_site/`, built without Quarto (which cannot be installed here), and its reader's check.

    python tools/render_docs.py                  # build _site/ from the notebooks' saved outputs (open _site/index.html)
    python tools/render_docs.py --execute [NB]   # first run the pages (all, or those named) in a Jupyter kernel, saving outputs
    python tools/render_docs.py --check          # build, then open every page in headless Chromium and check it

`bash tools/docs.sh` runs this in the project's environment, set up first.

Outputs. The pages show the outputs saved in the notebooks, as Quarto does on the published site. `--execute`
runs each page with nbclient in an ipykernel kernel, so fastai's progress and results are saved as the HTML tables
docs.fast.ai shows (not console frames), then cleans the notebook with nbdev-clean. The vision recipe runs in
`.venv-vision` (torchvision; `tools/setup_vision.sh`); cells flagged `cuda` run on a machine with a GPU, and on one
without are left unrun, keeping the outputs they have. `tools/executed.json` records a hash of each page's code as it
was run (with `bench/results/` for a page that reads it): the check fails on a page whose code or benchmark results
changed since, so outputs cannot go stale unnoticed.

Pages. nbdev processes the notebooks as for Quarto (`proc_nbs`: `show_doc` sections, cell directives, hidden
cells removed); each page of `nbs/sidebar.yml` becomes one HTML page named as nbdev names it
(`10_accumulate.ipynb` -> `accumulate.html`), with what a reader of docs.fast.ai expects around it: the sidebar's
sections as navigation, its own `<title>`, a table of contents of its sections, previous and next pages, and a search
box over a client-side index of every section (`search.js`). Headings get the ids pandoc (so Quarto) gives them
(`## Recorder and progress bar` -> `#recorder-and-progress-bar`), so a link written for the published site works
here too. Maths (`$...$`) is drawn as MathML (latex2mathml), which browsers show without a script; the pages load
nothing from the network. The layout reads down to 400 px wide (the page list behind a button). The GitHub deploy
workflow builds the real Quarto site from the same notebooks and the same sidebar.

`--check` is the reader's test. Without a browser it checks the notebooks behind the pages: outputs saved from the
current code (and benchmark results, for pages that read them), and examples that run from what the page shows (no
name only a hidden cell imports or defines; fastai's star imports are taken as read). Then, in headless Chromium
(over its DevTools protocol; $CHROMIUM names another binary), each page must show a title, its own `<title>`, a
table of contents of its sections, previous/next links in reading order, a search box that finds the page, its API
sections as docs.fast.ai does (only user-facing names; a class as `class`; a table row for every parameter), its
plots, links that lead somewhere, `#fragments` included, and maths drawn; and nowhere: error output, stderr
(warnings, logger complaints), progress-bar frames, training tables as text, object addresses (`at 0x7f...`),
machine paths (in outputs, prose or code), markdown links left as text, long or mixed number formats, GPU code
without its results, anything loaded from the network, or more than one visible line in ten an assertion. The
navigation must be the sidebar's reading order, with no internal pages. At 400 px wide, nothing may be wider than
the window or cover the text. Full-page screenshots of each page go to `_site/screenshots/` (and, 400 px wide,
`_site/screenshots/narrow/`). Without Chromium, the check builds the site, checks the notebooks, and exits 77
(skipped) with the command that installs it.

Before the site, the check tests itself: a page made of every problem the first site had (progress frames,
warnings, paths, `def Class(`, helpers as API, a missing parameter table, long and mixed numbers, assertions, dead
links and `#fragments`, navigation out of order, "Notebook" as its title, no table of contents, pager or search, CDN
maths, an object address, GPU code without results, a layout 400 px cannot hold), rendered as the first site rendered
it, a notebook whose examples use hidden helpers, a page of benchmark numbers whose results changed, and a Quarto
configuration without a table of contents, previous/next links or search, must draw each complaint.
"""
import argparse, hashlib, html, importlib, inspect, json, os, re, shutil, socket, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

root = Path(__file__).resolve().parent.parent
nbs_dir, site, proc = root/'nbs', root/'_site', root/'_proc'
record = root/'tools'/'executed.json'
SITE_URL = 'https://fastaccum.github.io/fastaccum/'
def skip_flags():
    "Cells that need hardware this machine lacks: left unrun by --execute (their saved outputs kept)"
    import torch
    return set() if torch.cuda.is_available() else {'cuda'}

# What a reader must find on each page: its API sections (user-facing names only; any other is an error) and
# the least number of plots. Pages not listed have neither.
EXPECTED = {
    'index.ipynb': dict(plots=1),
    '01_tutorial.ipynb': dict(plots=4),
    '02_recipes.ipynb': dict(plots=1),
    '03_vision.ipynb': dict(plots=1),
    '10_accumulate.ipynb': dict(api=['FixedBatchSize', 'MicroBatch', 'GradientAccumulation', 'GradientAccumulation.count_samples',
                                     'GradientAccumulation.step_position', 'loss_reduction']),
    '12_schedule.ipynb': dict(api=['GradientAccumulationSchedule', 'GradientAccumulationSchedule.scheduled_bs',
                                   'GradientAccumulationSchedule.in_use_bs', 'GradientAccumulationSchedule.preview',
                                   'GradientAccumulationSchedule.plot_schedule'], plots=2),
    '13_micro_batch.ipynb': dict(api=['split_sizes', 'slice_batch', 'is_out_of_memory', 'OutOfMemoryElsewhere', 'concat_outputs']),
    '16_whole_batch.ipynb': dict(api=['WholeBatchLoss'], plots=0),
    '04_contrastive.ipynb': dict(plots=1),
    '14_noise_scale.ipynb': dict(api=['GradientNoiseScale', 'noise_scale_estimates', 'GradientNoiseScale.plot_gns'], plots=1),
    '15_batchnorm.ipynb': dict(api=['batch_moments', 'saved_moments', 'combine_moments', 'update_running_stats', 'batchnorm_layers',
                                    'WindowBatchNorm', 'WindowBatchNorm.start', 'WindowBatchNorm.remove', 'WindowBatchNorm.micro_batch_ended', 'WindowBatchNorm.paused', 'WindowBatchNorm.new_piece',
                                    'WindowBatchNorm.window_closed', 'WindowBatchNorm.window_dropped', 'WindowBatchNorm.state_dict',
                                    'WindowBatchNorm.load_state_dict', 'batchnorm_warning']),
    '20_integrations.ipynb': dict(api=['StepLoggers'], plots=1),   # BatchCallback is internal: no API section
    '21_distributed.ipynb': dict(api=['ddp_world_size', 'all_reduce_sums', 'all_reduce_gradients', 'no_sync_model', 'is_fsdp',
                                      'WindowSync', 'fix_distributed_dl_broadcast']),
    '22_checkpoint.ipynb': dict(api=['save_checkpoint_file', 'load_checkpoint_file', 'CheckpointError', 'numbered_path', 'remove_partial_writes',
                                     'TrainingCheckpoint'], plots=1),
    '31_benchmarks.ipynb': dict(plots=3),
    '40_window.ipynb': dict(api=['AccumWindow', 'AccumWindow.plan', 'AccumWindow.weight', 'AccumWindow.close',
                                 'AccumWindow.add', 'AccumWindow.mean_loss', 'plan_epoch', 'whole_units']),
}


# ---------------------------------------------------------------- pages and their order
def sidebar():
    "[(section or None, notebook name)] in reading order, from nbs/sidebar.yml"
    import yaml
    pages = []
    def walk(items, section):
        for item in items:
            if isinstance(item, str): pages.append((section, item))
            else: walk(item['contents'], item['section'])
    walk(yaml.safe_load((nbs_dir/'sidebar.yml').read_text())['website']['sidebar']['contents'], None)
    return pages


def page_name(nb_name):
    "The HTML page nbdev and Quarto make of a notebook: `10_accumulate.ipynb` -> `accumulate.html`"
    return re.sub(r'^\d+[a-z]?_', '', Path(nb_name).stem) + '.html'


def directives(src):
    "A code cell's `#|` directives, as {name: value}"
    return {m.group(1): m.group(2).strip() for m in re.finditer(r'^#\|\s*([\w-]+):?(.*)$', src, flags=re.M)}


def code_hash(nb, results=root/'bench'/'results'):
    "What a page's outputs depend on: its code cells, and the benchmark results when its code reads them"
    code = '\n#-----\n'.join(''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'code')
    h = hashlib.sha1(code.encode())
    if 'bench/results' in code:   # the numbers a page shows from the benchmarks: a new run makes its outputs stale
        for f in sorted(Path(results).glob('*')): h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- --execute
def skipped(src):
    d = directives(src)
    return bool(skip_flags() & set(d)) or d.get('eval', '').lower() == 'false'


def execute_one(path):
    "Run one notebook in a Jupyter kernel of this interpreter and save its outputs (runs in that notebook's environment)"
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    run = nbformat.from_dict(json.loads(json.dumps(nb)))
    for c in run.cells:   # cells this machine cannot run stay in the notebook, unrun
        if c.cell_type == 'code' and skipped(c.source): c.cell_type = 'raw'; c.pop('outputs'); c.pop('execution_count')
    NotebookClient(run, timeout=900, kernel_name='python3', resources={'metadata': {'path': str(path.parent)}}).execute()
    for original, ran in zip(nb.cells, run.cells):
        if original.cell_type == 'code' and not skipped(original.source):   # an unrun cell keeps what it showed
            original.outputs = ran.get('outputs', [])
            original.execution_count = ran.get('execution_count')
            for o in original.outputs: o.get('metadata', {}).clear()
    nbformat.write(nb, path)


def interpreter(path):
    "The environment a notebook runs in: .venv-vision for the vision recipe (torchvision), else this one"
    vision = any('vision' in directives(''.join(c['source'])) for c in json.loads(path.read_text())['cells'] if c['cell_type'] == 'code')
    if not vision: return sys.executable
    subprocess.run(['bash', str(root/'tools'/'setup_vision.sh')], check=True, capture_output=True)
    return str(root/'.venv-vision'/'bin'/'python')


def execute(names):
    "Run the named pages (two at a time), clean them with nbdev, and record what code their outputs come from"
    paths = [nbs_dir/n for n in names]
    env = dict(os.environ, OMP_NUM_THREADS='1', WANDB_MODE='offline', WANDB_SILENT='true', PYTHONHASHSEED='0')
    def run(path):
        start = time.time()
        res = subprocess.run([interpreter(path), __file__, '--execute-one', str(path)], env=env, capture_output=True, text=True)
        return path, res, time.time()-start
    failed = []
    with ThreadPoolExecutor(2) as pool:
        for path, res, secs in pool.map(run, paths):
            print(f'{"ran   " if res.returncode == 0 else "FAILED"} {path.name} ({secs:.0f} s)', flush=True)
            if res.returncode: failed.append(path.name); print(res.stderr[-3000:])
    for path in paths: subprocess.run([str(Path(sys.executable).parent/'nbdev-clean'), '--fname', str(path)], cwd=root, check=True)
    hashes = json.loads(record.read_text()) if record.exists() else {}
    for path in paths:
        if path.name not in failed: hashes[path.name] = code_hash(json.loads(path.read_text()))
    record.write_text(json.dumps(dict(sorted(hashes.items())), indent=1) + '\n')
    if failed: sys.exit(f'these pages failed to run: {failed}')


# ---------------------------------------------------------------- build
CSS = """<style>
body { margin: 0; }
#fa-top { position: fixed; top: 0; left: 0; right: 0; height: 48px; background: #2780e3; color: white; z-index: 10;
          display: flex; align-items: center; gap: 12px; padding: 0 16px; box-sizing: border-box;
          font: 15px -apple-system, "Segoe UI", Roboto, sans-serif; }
#fa-top .brand { color: white; text-decoration: none; font-weight: 600; font-size: 20px; }
#fa-menu { display: none; background: none; border: 1px solid rgba(255,255,255,.6); color: white; border-radius: 4px;
           font-size: 15px; padding: 3px 8px; cursor: pointer; }
#fa-searchbox { margin-left: auto; position: relative; }
#fa-search { width: 240px; max-width: 40vw; padding: 5px 8px; border: 0; border-radius: 4px; font-size: 14px; }
#fa-results { position: absolute; right: 0; top: 38px; width: 440px; max-width: calc(100vw - 24px); max-height: 70vh;
              overflow-y: auto; background: white; color: #222; border: 1px solid #ccc; border-radius: 4px;
              box-shadow: 0 4px 16px rgba(0,0,0,.2); }
#fa-results a { display: block; padding: 6px 10px; color: #222; text-decoration: none; border-bottom: 1px solid #eee; }
#fa-results a:hover, #fa-results a:focus { background: #eef4fc; }
#fa-results .where { color: #2780e3; font-weight: 600; font-size: 13px; }
#fa-results .snippet { font-size: 12px; color: #555; }
#fa-results .none { padding: 8px 10px; font-size: 13px; color: #555; }
#fa-nav { position: fixed; top: 48px; left: 0; width: 230px; bottom: 0; overflow-y: auto; padding: 16px;
          box-sizing: border-box; background: #f8f9fa; border-right: 1px solid #e3e3e3; z-index: 5;
          font: 14px -apple-system, "Segoe UI", Roboto, sans-serif; }
#fa-nav .section { margin: 14px 0 4px; font-weight: 600; color: #555; }
#fa-nav a { display: block; padding: 3px 0 3px 8px; color: #2780e3; text-decoration: none; }
#fa-nav a.current { font-weight: 600; color: #000; border-left: 2px solid #2780e3; }
#fa-main { margin: 48px 0 0 230px; max-width: 1000px; padding: 8px 24px 40px; box-sizing: border-box; min-width: 0; }
#fa-toc { font: 13px -apple-system, "Segoe UI", Roboto, sans-serif; }
#fa-toc .toc-title { font-weight: 600; color: #555; margin-bottom: 4px; }
#fa-toc a { display: block; padding: 2px 0 2px 8px; color: #2780e3; text-decoration: none; border-left: 1px solid #ddd;
            overflow-wrap: anywhere; }
#fa-toc a.l3 { padding-left: 20px; font-size: 12px; }
#fa-pager { display: flex; justify-content: space-between; gap: 16px; margin-top: 40px; padding-top: 12px;
            border-top: 1px solid #ddd; font: 14px -apple-system, "Segoe UI", Roboto, sans-serif; }
#fa-pager a { color: #2780e3; text-decoration: none; max-width: 48%; }
#fa-pager a.next { margin-left: auto; text-align: right; }
#fa-pager .dir { display: block; font-size: 12px; color: #777; }
.jp-RenderedHTMLCommon table { font-size: 13px; }
.jp-OutputArea-output, .jp-InputArea-editor, .jp-RenderedMarkdown { overflow-x: auto; }
.jp-RenderedMarkdown table, .jp-OutputArea-output table { display: block; overflow-x: auto; max-width: 100%; }
.jp-OutputArea-output img { max-width: 100%; height: auto; }
.jp-Cell, .jp-InputArea, .jp-OutputArea, .jp-OutputArea-child, .jp-Cell-inputWrapper, .jp-Cell-outputWrapper,
.jp-InputArea-editor, .jp-OutputArea-output, .jp-RenderedMarkdown { min-width: 0; max-width: 100%; }
math[display="block"] { font-size: 120%; margin: 0.8em 0; }
@media (min-width: 1200px) {
  #fa-main { margin-right: 230px; }
  #fa-toc { position: fixed; top: 64px; right: 12px; width: 210px; max-height: calc(100vh - 80px); overflow-y: auto; }
}
@media (max-width: 1199px) {
  #fa-toc { margin: 12px 0 4px; padding: 8px 12px; background: #f8f9fa; border: 1px solid #e3e3e3; border-radius: 4px; }
}
@media (max-width: 800px) {
  #fa-menu { display: inline-block; }
  #fa-nav { display: none; width: 100%; max-width: 320px; box-shadow: 4px 0 16px rgba(0,0,0,.2); }
  body.fa-nav-open #fa-nav { display: block; }
  #fa-main { margin-left: 0; padding: 8px 10px 40px; }
  #fa-search { width: 130px; }
  #fa-top .brand { font-size: 18px; }
  .jp-Cell { padding: 4px 0 !important; }
}
</style>"""

SITE_JS = r"""// The site's navigation: the search box (over search.js, an index of every section of every page) and, on a
// narrow screen, the menu that shows the page list.
(function () {
  const box = document.getElementById('fa-search'), out = document.getElementById('fa-results');
  const menu = document.getElementById('fa-menu');
  if (menu) menu.addEventListener('click', () => document.body.classList.toggle('fa-nav-open'));
  if (!box || !out) return;
  const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
  function snippet(text, term) {
    const i = text.toLowerCase().indexOf(term);
    if (i < 0) return text.slice(0, 140);
    const a = Math.max(0, i - 60);
    return (a ? '…' : '') + text.slice(a, i + 100) + '…';
  }
  function search() {
    const q = box.value.trim().toLowerCase();
    out.replaceChildren();
    if (q.length < 2) { out.hidden = true; return; }
    const terms = q.split(/\s+/), hits = [];
    for (const e of (window.FA_INDEX || [])) {
      const page = e.page.toLowerCase(), sec = e.section.toLowerCase(), text = e.text.toLowerCase();
      if (!terms.every(w => page.includes(w) || sec.includes(w) || text.includes(w))) continue;
      let score = 0;
      for (const w of terms) score += (sec.includes(w) ? 10 : 0) + (page.includes(w) ? 5 : 0) + Math.min(text.split(w).length - 1, 5);
      hits.push([score, e]);
    }
    hits.sort((a, b) => b[0] - a[0]);
    for (const [, e] of hits.slice(0, 20)) {
      const a = el('a'); a.href = e.href;
      a.append(el('div', 'where', e.section && e.section !== e.page ? e.page + ' › ' + e.section : e.page),
               el('div', 'snippet', snippet(e.text, terms[0])));
      out.append(a);
    }
    if (!hits.length) out.append(el('div', 'none', 'Nothing found for “' + box.value.trim() + '”'));
    out.hidden = false;
  }
  box.addEventListener('input', search);
  box.addEventListener('keydown', ev => {
    if (ev.key === 'Enter') { const a = out.querySelector('a'); if (a) location.href = a.href; }
    if (ev.key === 'Escape') { box.value = ''; search(); }
  });
  document.addEventListener('click', ev => { if (!ev.target.closest('#fa-searchbox')) out.hidden = true; });
})();
"""


FIRST_SITE_CSS = """<style>
body { margin: 0; }
#fa-top { position: fixed; top: 0; left: 0; right: 0; height: 48px; background: #2780e3; color: white; z-index: 10;
          font: 600 20px/48px -apple-system, "Segoe UI", Roboto, sans-serif; padding-left: 20px; }
#fa-top a { color: white; text-decoration: none; }
#fa-nav { position: fixed; top: 48px; left: 0; width: 250px; bottom: 0; overflow-y: auto; padding: 16px;
          box-sizing: border-box; background: #f8f9fa; border-right: 1px solid #e3e3e3;
          font: 14px -apple-system, "Segoe UI", Roboto, sans-serif; }
#fa-nav .section { margin: 14px 0 4px; font-weight: 600; color: #555; }
#fa-nav a { display: block; padding: 3px 0 3px 8px; color: #2780e3; text-decoration: none; }
#fa-nav a.current { font-weight: 600; color: #000; border-left: 2px solid #2780e3; }
#fa-main { margin: 48px 0 0 270px; max-width: 1050px; padding: 8px 24px 40px; }
.jp-RenderedHTMLCommon table { font-size: 13px; }
</style>"""   # the first site's layout: the self-test renders a page with it


def frontmatter(nb):
    "Title and description from the raw YAML cell nbdev puts first (removed from the cells)"
    import yaml
    raw = next((c for c in nb.cells if c.cell_type == 'raw' and c.source.startswith('---')), None)
    if raw is None: return {}
    nb.cells.remove(raw)
    return yaml.safe_load(raw.source.strip().strip('-')) or {}


def local_links(text, names):
    "Point links to notebooks, and to the published site, at the local pages"
    text = text.replace(SITE_URL, '')
    text = re.sub(r'\{target="_blank"[^}]*\}', '', text)            # Quarto-only link attributes
    link = lambda m: m.group(1) + names.get(Path(m.group(2)).name, m.group(2) + '.ipynb')
    return re.sub(r'(\]\(|href=")([\w./-]+)\.ipynb', link, text)   # link targets only, not text that names a notebook


# ---------------------------------------------------------------- maths: MathML, which browsers draw without a script
MATH = re.compile(r'\$\$(.+?)\$\$|(?<![\\$\w])\$(?=\S)([^$\n]+?)(?<=\S)\$(?![\w$])', re.S)
CODE_SPAN = re.compile(r'(```.*?```|`[^`\n]*`)', re.S)


def tex_to_mathml(tex, block):
    "MathML for TeX (latex2mathml, a dev dependency); without it, the TeX itself, readable as text"
    try: from latex2mathml.converter import convert
    except ImportError: return f'<code class="tex">{html.escape(tex)}</code>'
    return convert(tex.strip(), display='block' if block else 'inline').replace('\n', '')


def render_maths(md):
    "`$...$` and `$$...$$` of a markdown cell as MathML, outside code; Quarto draws the same TeX with MathJax"
    parts = CODE_SPAN.split(md)
    for i in range(0, len(parts), 2):
        parts[i] = MATH.sub(lambda m: tex_to_mathml(m.group(1), True) if m.group(1) is not None else tex_to_mathml(m.group(2), False), parts[i])
    return ''.join(parts)


def prepare(nb, meta, names, maths=True):
    import nbformat
    "Turn a processed notebook into one nbconvert renders as the page a reader should see"
    cells = []
    if meta.get('title'):
        head = f"# {meta['title']}" + (f"\n\n> {meta['description']}" if meta.get('description') else '')
        cells.append(nbformat.v4.new_markdown_cell(head))
    for c in nb['cells']:
        src = c['source']
        c['metadata'] = {}   # nbdev's processing leaves timings there that nbformat's schema refuses
        if c['cell_type'] == 'markdown':
            c['source'] = local_links(src, names)
            if maths: c['source'] = render_maths(c['source'])
        elif c['cell_type'] == 'code':
            d = directives(src)
            c['source'] = '\n'.join(l for l in src.splitlines() if not l.startswith('#|')).strip()
            tags = []
            if d.get('echo', '').lower() == 'false': tags.append('remove_input')
            if 'cuda' in d: tags.append('cuda')   # the check wants a GPU cell's results shown with it
            if tags: c['metadata']['tags'] = tags
            if d.get('output', '').lower() == 'false': c['outputs'] = []
            for o in c.get('outputs', []):   # show_doc's markdown: its links too
                if 'text/markdown' in o.get('data', {}): o['data']['text/markdown'] = local_links(o['data']['text/markdown'], names)
            if not c['source'] and not c.get('outputs'): continue
        elif c['cell_type'] == 'raw': continue
        cells.append(c)
    nb['cells'] = cells
    return nb


# ---------------------------------------------------------------- headings: Quarto's (pandoc's) ids, so links agree
def pandoc_id(text):
    "The id pandoc (so Quarto) gives a heading: lower case, punctuation but `_-.` dropped, words joined by `-`"
    kept = ''.join(c for c in text.lower() if c.isalnum() or c.isspace() or c in '_-.')
    ident = '-'.join(kept.split())
    while ident and not ident[0].isalpha(): ident = ident[1:]
    return ident or 'section'


HEADING = re.compile(r'<h([1-6])(?: id="[^"]*")?>(.*?)</h\1>', re.S)
ANCHOR = re.compile(r'<a class="anchor-link" href="[^"]*">¶</a>')


def heading_ids(body):
    "Give every heading pandoc's id (a repeated one gets `-1`, `-2`, as pandoc does); return the body and its headings"
    seen, headings = {}, []
    def sub(m):
        level, inner = int(m.group(1)), ANCHOR.sub('', m.group(2))
        text = html.unescape(re.sub(r'<[^>]+>', '', inner)).strip()
        base = pandoc_id(text)
        n = seen.get(base, 0); seen[base] = n + 1
        ident = f'{base}-{n}' if n else base
        headings.append((level, ident, text))
        return f'<h{level} id="{ident}">{inner}<a class="anchor-link" href="#{ident}">¶</a></h{level}>'
    return HEADING.sub(sub, body), headings


def toc_html(headings):
    "The page's table of contents: its sections (h2) and subsections (h3)"
    items = [(l, i, t) for l, i, t in headings if l in (2, 3)]
    if not items: return ''
    links = ''.join(f'<a class="l{l}" href="#{i}">{html.escape(t)}</a>' for l, i, t in items)
    return f'<nav id="fa-toc" aria-label="On this page"><div class="toc-title">On this page</div>{links}</nav>'


def pager_html(pages, current):
    "Links to the previous and next pages in reading order"
    names = [page_name(n) for _, n, _ in pages]
    if current not in names: return ''
    i, out = names.index(current), []
    if i > 0: out.append(f'<a class="prev" href="{names[i-1]}"><span class="dir">← Previous</span>{html.escape(pages[i-1][2])}</a>')
    if i < len(names) - 1: out.append(f'<a class="next" href="{names[i+1]}"><span class="dir">Next →</span>{html.escape(pages[i+1][2])}</a>')
    return f'<nav id="fa-pager">{"".join(out)}</nav>'


def nav_html(pages, current):
    out, last = ['<nav id="fa-nav">'], None
    for section, nb_name, title in pages:
        if section != last and section: out.append(f'<div class="section">{html.escape(section)}</div>')
        last = section
        name = page_name(nb_name)
        out.append(f'<a href="{name}"{" class=current" if name == current else ""}>{html.escape(title)}</a>')
    return ''.join(out) + '</nav>'


def page_title(title):
    return 'fastaccum' if title in ('', 'fastaccum') else f'{title} – fastaccum'


# The lab template's scripts from a CDN: require.js (for widgets, which no page has), MathJax (maths is MathML here)
# and mermaid (no page has a diagram). A page must read without the network.
CDN_SCRIPTS = [re.compile(r'<script src="https://[^"]*require[^"]*"></script>'),
               re.compile(r'<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->', re.S),
               re.compile(r'<script type="module">\s*document\.addEventListener\("DOMContentLoaded", async \(\) => \{\s*const diagrams.*?</script>', re.S)]


def section_index(body, headings, href, title):
    "Search entries for a page: one per section, its heading and its text"
    main = re.sub(r'<(script|style|nav)\b.*?</\1>', '', body, flags=re.S)   # the page's text, not its navigation
    main = main[main.find('<main'):] if '<main' in main else main
    parts = re.split(r'(<h[1-6] id="[^"]*">)', main)
    entries, section, ident = [], title, ''
    for part in parts:
        m = re.match(r'<h[1-6] id="([^"]*)">', part)
        if m: ident = m.group(1); section = next((t for _, i, t in headings if i == ident), title); continue
        text = ' '.join(html.unescape(re.sub(r'<[^>]+>', ' ', part)).replace('¶', ' ').split())
        if text: entries.append(dict(page=title, section=section, href=href + (f'#{ident}' if ident else ''), text=text[:3000]))
    return entries


def write_page(path, nb, meta, names, pages, first_site=False):
    """One processed notebook as an HTML page, with the site's navigation; return its search entries.
    `first_site=True` renders it as the first site did (nbconvert's ids and title, CDN scripts, no table of contents,
    pager or search, a fixed layout): only the check's self-test asks for that, to show the check finds each problem."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config
    config = Config()
    config.TagRemovePreprocessor.remove_input_tags = ('remove_input',)
    config.TagRemovePreprocessor.enabled = True
    config.HTMLExporter.exclude_input_prompt = config.HTMLExporter.exclude_output_prompt = True
    title = meta.get('title', '')
    nb = prepare(nb, meta, names, maths=not first_site)
    if not first_site: nb.metadata['title'] = page_title(title)
    body, _ = HTMLExporter(config=config, template_name='lab').from_notebook_node(nb)
    if first_site:
        chrome, end = f'<div id="fa-top"><a class="brand" href="index.html">fastaccum</a></div>{nav_html(pages, path.name)}<div id="fa-main">', '</div>'
        body = body.replace('</head>', FIRST_SITE_CSS + '</head>', 1)
        headings = []
    else:
        for cdn in CDN_SCRIPTS: body = cdn.sub('', body)
        body, headings = heading_ids(body)
        search = ('<div id="fa-searchbox" role="search"><input id="fa-search" type="search" placeholder="Search the docs" '
                  'aria-label="Search the docs" autocomplete="off"><div id="fa-results" hidden></div></div>')
        chrome = (f'<header id="fa-top"><button id="fa-menu" aria-label="Pages">☰ Pages</button>'
                  f'<a class="brand" href="index.html">fastaccum</a>{search}</header>{nav_html(pages, path.name)}'
                  f'<div id="fa-main">')
        cells = [m.start() for m in re.finditer(r'<div[^>]*class="jp-Cell ', body)]
        at = cells[1] if len(cells) > 1 else body.index('</body>')   # after the title (at the side on a wide screen)
        body = body[:at] + toc_html(headings) + body[at:]
        end = f'{pager_html(pages, path.name)}</div><script src="search.js"></script><script src="site.js"></script>'
        body = body.replace('</head>', CSS + '</head>', 1)
    body = re.sub(r'(<body[^>]*>)', lambda m: m.group(1) + chrome, body, count=1)
    body = body.replace('</body>', end + '</body>', 1)
    path.write_text(body)
    return section_index(body, headings, path.name, title or path.stem)


def build():
    "Process the notebooks with nbdev, and write one HTML page per sidebar entry into `_site/`, with a search index"
    import nbformat
    res = subprocess.run([sys.executable, '-c', 'from nbdev.serve import proc_nbs; proc_nbs(force=True, n_workers=2)'],
                         cwd=root, capture_output=True, text=True, env=dict(os.environ, WANDB_MODE='offline', WANDB_SILENT='true'))
    missing = [n for _, n in sidebar() if not (proc/n).exists()]
    if res.returncode or missing: sys.exit(f'nbdev could not process the notebooks {missing}:\n{res.stdout[-3000:]}{res.stderr[-3000:]}')
    if site.exists(): shutil.rmtree(site)
    site.mkdir()
    loaded = []
    for section, nb_name in sidebar():
        nb = nbformat.reads((proc/nb_name).read_text(), as_version=4)   # multi-line strings joined
        meta = frontmatter(nb)
        loaded.append((section, nb_name, nb, meta))
    names = {Path(n).stem: page_name(n) for _, n, _, _ in loaded}
    pages = [(s, n, m.get('title') or Path(n).stem) for s, n, _, m in loaded]
    index = []
    for section, nb_name, nb, meta in loaded: index += write_page(site/page_name(nb_name), nb, meta, names, pages)
    (site/'search.js').write_text('window.FA_INDEX = ' + json.dumps(index, ensure_ascii=False) + ';\n')
    (site/'site.js').write_text(SITE_JS)
    return [(nb_name, page_name(nb_name), title) for _, nb_name, title in pages]


# ---------------------------------------------------------------- --check, in Chromium over its DevTools protocol
def chromium():
    "The browser the check drives: $CHROMIUM (a name or a path; e.g. Google Chrome's), else chromium"
    if 'CHROMIUM' in os.environ: return shutil.which(os.environ['CHROMIUM'])
    return shutil.which('chromium') or shutil.which('chromium-browser')


INSTALL_CHROMIUM = ('install Chromium (Debian/Ubuntu: `sudo apt-get install chromium`; elsewhere set CHROMIUM to a Chromium '
                    'or Chrome binary) and run `bash tools/docs.sh --check`')


class Browser:
    "Headless Chromium, driven over the DevTools protocol: load a page, read its DOM, take a full-page screenshot"
    def __init__(self):
        from websockets.sync.client import connect
        with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
        self.profile = tempfile.mkdtemp()
        flags = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
                 '--disable-sync', '--no-first-run', '--hide-scrollbars', f'--remote-debugging-port={port}',
                 f'--user-data-dir={self.profile}', '--window-size=1280,900', 'about:blank']
        self.proc = subprocess.Popen([chromium(), *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        from urllib.request import urlopen
        for _ in range(100):
            try: targets = json.loads(urlopen(f'http://127.0.0.1:{port}/json/list').read()); break
            except OSError: time.sleep(0.2)
        else: raise RuntimeError('Chromium did not start')
        page = next(t for t in targets if t['type'] == 'page')
        self.ws, self.n = connect(page['webSocketDebuggerUrl'], max_size=None).__enter__(), 0
        self.call('Page.enable')

    def call(self, method, **params):
        self.n += 1
        self.ws.send(json.dumps(dict(id=self.n, method=method, params=params)))
        while True:
            msg = json.loads(self.ws.recv(timeout=120))
            if msg.get('id') == self.n:
                if 'error' in msg: raise RuntimeError(f'{method}: {msg["error"]}')
                return msg.get('result', {})

    def open(self, url):
        self.call('Page.navigate', url=url)
        for _ in range(200):   # until the page has loaded
            if self.js('document.readyState') == 'complete': break
            time.sleep(0.05)
        time.sleep(0.3)

    def js(self, expr):
        return self.call('Runtime.evaluate', expression=expr, returnByValue=True, awaitPromise=True)['result'].get('value')

    def screenshot(self, path, width=1280):
        import base64
        height = min(self.js('document.documentElement.scrollHeight'), 30000)
        data = self.call('Page.captureScreenshot', format='png', captureBeyondViewport=True,
                         clip=dict(x=0, y=0, width=width, height=height, scale=1))['data']
        Path(path).write_bytes(base64.b64decode(data))

    def width(self, px):
        "Lay the page out for a window `px` wide (None: the browser's own 1280)"
        if px is None: self.call('Emulation.clearDeviceMetricsOverride')
        else: self.call('Emulation.setDeviceMetricsOverride', width=px, height=800, deviceScaleFactor=1, mobile=False)
        time.sleep(0.2)

    def close(self):
        self.ws.close(); self.proc.kill(); self.proc.wait(); shutil.rmtree(self.profile, ignore_errors=True)


# What the page's JavaScript reads off the rendered DOM
PAGE_FACTS = r"""(() => {
  const text = e => e.innerText;
  const main = document.querySelector('#fa-main');
  const outputs = [...document.querySelectorAll('.jp-OutputArea-output')];
  const api = [...document.querySelectorAll('.jp-OutputArea-output h3, .jp-OutputArea-output h4')].map(h => {
    const out = h.closest('.jp-OutputArea-output');
    const pre = out.querySelector('pre'), table = out.querySelector('table');
    return {name: h.innerText.replace(/¶/g, '').trim(), signature: pre ? pre.innerText : '',
            rows: table ? [...table.querySelectorAll('tbody tr')].map(r => r.cells[0].innerText.trim()) : null};
  });
  const prose_only = c => { const d = c.cloneNode(true); d.querySelectorAll('code, pre, math').forEach(e => e.remove()); return d.textContent; };
  const remote = [...document.querySelectorAll('script[src], link[rel=stylesheet][href], img[src], iframe[src]')]
    .map(e => e.getAttribute('src') || e.getAttribute('href')).filter(u => /^(https?:)?\/\//.test(u));
  const remote_inline = [...document.querySelectorAll('script:not([src])')].map(s => s.textContent.match(/https?:\/\/[^"'\s)]+/))
    .filter(m => m).map(m => m[0]);
  return {
    title: [...document.querySelectorAll('h1')].map(text),
    doc_title: document.title,
    n_titles: document.querySelectorAll('title').length,
    page_text: main ? main.innerText : '',
    prose: [...document.querySelectorAll('.jp-MarkdownCell')].map(text),
    prose_no_code: [...document.querySelectorAll('.jp-MarkdownCell')].map(prose_only),
    nav: [...document.querySelectorAll('#fa-nav a')].map(a => a.getAttribute('href')),
    links: [...document.querySelectorAll('#fa-main a[href]')].map(a => a.getAttribute('href')),
    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
    headings: [...document.querySelectorAll('#fa-main h2[id], #fa-main h3[id]')].filter(h => !h.closest('#fa-toc')).map(h => h.id),
    toc: [...document.querySelectorAll('#fa-toc a')].map(a => a.getAttribute('href')),
    prev: (document.querySelector('#fa-pager a.prev') || {getAttribute: () => null}).getAttribute('href'),
    next: (document.querySelector('#fa-pager a.next') || {getAttribute: () => null}).getAttribute('href'),
    search_box: !!document.querySelector('input#fa-search'),
    search_index: Array.isArray(window.FA_INDEX) ? window.FA_INDEX.length : 0,
    remote: remote.concat(remote_inline),
    maths: document.querySelectorAll('math').length,
    images: [...document.querySelectorAll('#fa-main img')].map(i => ({src: i.getAttribute('src').slice(0, 40), ok: i.complete && i.naturalWidth > 0})),
    code: [...document.querySelectorAll('.jp-InputArea-editor')].map(text),
    gpu_cells: [...document.querySelectorAll('.jp-CodeCell.celltag_cuda')].map(c => ({
      code: (c.querySelector('.jp-InputArea-editor') || {innerText: ''}).innerText,
      outputs: c.querySelectorAll('.jp-OutputArea-output').length})),
    stderr: outputs.filter(o => o.getAttribute('data-mime-type') === 'application/vnd.jupyter.stderr').map(text),
    outputs: outputs.map(text),
    pre_outputs: outputs.filter(o => o.querySelector('pre')).map(text),
    tables: [...document.querySelectorAll('.jp-OutputArea-output table')].filter(t => !t.closest('.jp-OutputArea-output').querySelector('h3, h4'))
              .map(t => [...t.querySelectorAll('tbody tr')].map(r => [...r.cells].map(text))),
    api: api,
  };
})()"""

# Typing into the search box: the results it lists
SEARCH = r"""(async q => {
  const box = document.querySelector('#fa-search'), out = document.querySelector('#fa-results');
  if (!box || !out) return null;
  box.value = q; box.dispatchEvent(new Event('input', {bubbles: true}));
  await new Promise(r => setTimeout(r, 50));
  const shown = !out.hidden && out.getBoundingClientRect().height > 0;
  const hrefs = [...out.querySelectorAll('a')].map(a => a.getAttribute('href'));
  box.value = ''; box.dispatchEvent(new Event('input', {bubbles: true}));
  return {shown, hrefs};
})"""

# The page as a 400 px wide window shows it: how wide the page is, and what a reader sees left, middle and right
NARROW = r"""(() => {
  const main = document.querySelector('#fa-main'), r = main ? main.getBoundingClientRect() : null;
  const y = Math.min(300, window.innerHeight - 10);
  const inMain = x => { const e = document.elementFromPoint(x, y); return !!(e && e.closest('#fa-main')); };
  return {width: document.documentElement.scrollWidth, main_left: r ? r.left : null,
          main_width: r ? Math.min(r.right, window.innerWidth) - Math.max(r.left, 0) : 0,
          readable: [20, 200, 380].map(inMain)};
})()"""

MACHINE_PATH = r'(/work/|/tmp/|/home/|/root/|/usr/|/opt/|site-packages|\.venv)'
PROBLEM_TEXT = [   # in any output: (pattern, what it is)
    (r'Traceback \(most recent call last\)|\w+Error: ', 'error output'),
    (r'Warning\b|warnings\.warn|<ipython-input|/ipykernel_\d+/', 'a warning'),
    (r'Could not gather|could not log|shadowing an attribute|wandb: ', 'a logger complaint'),
    (r'█|\r|Epoch \d+/\d+ :|\|-{5,}', 'progress-bar frames'),
    (MACHINE_PATH, 'a machine path'),
    (r'<[^<>\n]* at 0x[0-9a-fA-F]+>', 'an object address (a default or value shown by its repr, different every build)'),
]
TEX_LEFT = re.compile(r'\$\$|\$[^$\s][^$\n]*?[^$\s]\$(?![\w$])|\\(frac|operatorname|sum|mathrm|sqrt|Sigma|left|right)\b')
ASSERTION = re.compile(r'^\s*(assert\b|test_\w+\(|test_fail\b)')
NARROW_PX = 400


def resolve(name):
    "The object a show_doc heading documents"
    import fastaccum
    mods = [importlib.import_module(f'fastaccum.{m}') for m in fastaccum.__dict__.get('__modules__', [])] or \
           [importlib.import_module(f'fastaccum.{p.stem}') for p in (root/'fastaccum').glob('[a-z]*.py')]
    head, *rest = name.split('.')
    for m in mods:
        if hasattr(m, head):
            obj = getattr(m, head)
            for r in rest: obj = getattr(obj, r)
            return obj


def parameters(obj):
    if not callable(obj): return None
    try: sig = inspect.signature(obj)
    except (TypeError, ValueError): return None
    return [p for p in sig.parameters if p not in ('self', 'cls')]


def number_problems(table):
    "Long numbers, and columns that mix formats or print integers as floats"
    problems, columns = [], list(zip(*[r for r in table if r])) if table else []
    for col in columns:
        cells = [c.strip() for c in col]
        nums = [c for c in cells if re.fullmatch(r'-?[\d.]+(e[-+]?\d+)?%?', c)]
        long = [c for c in nums if re.search(r'\.\d{7,}', c)]
        if long: problems.append(f'long numbers {long[:2]}')
        sci = [c for c in nums if 'e' in c]
        if sci and len(sci) < len(nums): problems.append(f'a column mixes {sci[0]} with {next(c for c in nums if "e" not in c)}')
        if len(nums) > 1 and all(re.fullmatch(r'-?\d+\.0+', c) for c in nums): problems.append(f'integers printed as {nums[0]}')
    return problems


def fragment_problems(links, ids, folder):
    "Links whose `#fragment` names no element of the page they lead to (this one, or another page of the site)"
    problems, cache = [], {}
    def ids_of(target):
        if target not in cache:
            f = folder/target
            cache[target] = {html.unescape(i) for i in re.findall(r'\bid="([^"]*)"', f.read_text())} if f.exists() else None
        return cache[target]
    for href in links:
        if href.startswith(('http:', 'https:', 'mailto:', '//')) or '#' not in href: continue
        target, frag = href.split('#', 1)
        from urllib.parse import unquote
        frag = unquote(frag)
        if not frag: continue
        known = set(ids) if not target else ids_of(target)
        if known is not None and frag not in known: problems.append(f'a link to a fragment that is not there: {href}')
    return problems


def check_page(browser, nb_name, name, title, order, folder=site):
    "What a reader sees on one page, open in `browser`; `order` is the site's pages in reading order"
    facts = browser.js(PAGE_FACTS)
    problems, want = [], EXPECTED.get(nb_name, {})
    if not facts['title']: problems.append('no title')
    if facts['nav'] != order: problems.append(f'navigation {facts["nav"]} is not the reading order {order}')
    # the page's <title>: its own, once
    expected_title = page_title(title)
    if facts['n_titles'] != 1: problems.append(f'{facts["n_titles"]} <title> elements, not one')
    if facts['doc_title'] != expected_title: problems.append(f'its <title> is {facts["doc_title"]!r}, not its own ({expected_title!r})')
    # navigation a reader expects: a table of contents of its sections, previous and next pages, a search box that finds
    if facts['headings'] and not facts['toc']: problems.append('no table of contents (its sections have no links at the top or side)')
    elif facts['toc'] != ['#' + h for h in facts['headings']]:
        problems.append(f'the table of contents {facts["toc"][:6]} is not the sections of the page {["#" + h for h in facts["headings"]][:6]}')
    i = order.index(name) if name in order else None
    if i is not None:
        want_prev, want_next = (order[i-1] if i > 0 else None), (order[i+1] if i + 1 < len(order) else None)
        if (facts['prev'], facts['next']) != (want_prev, want_next):
            problems.append(f'previous/next links are {facts["prev"]}/{facts["next"]}, not {want_prev}/{want_next}')
    if not facts['search_box']: problems.append('no search box')
    else:
        if not facts['search_index']: problems.append('no search index (search.js did not load)')
        found = browser.js(f'({SEARCH})({json.dumps(title)})')
        if not found or not found['shown'] or not any(h.split('#')[0] == name for h in found['hrefs']):
            problems.append(f'searching for its title {title!r} does not list the page: {found}')
        else:
            for h in found['hrefs']:
                target = h.split('#')[0]
                if not (folder/target).exists(): problems.append(f'the search lists a page that is not there: {h}')
    # everything from this machine: no script, style or image from the network; maths drawn, not left as TeX
    for url in facts['remote']: problems.append(f'needs the network: {url[:90]}')
    for block in facts['prose_no_code']:
        m = TEX_LEFT.search(block)
        if m: problems.append(f'maths left as TeX: ...{block[max(0, m.start()-40):m.end()+40]!r}...')
    # API sections: user-facing names only, classes as classes, every parameter in a table
    found = [a['name'] for a in facts['api']]
    for api in want.get('api', []):
        if api not in found: problems.append(f'no API section for {api}')
    for a in facts['api']:
        if a['name'] not in want.get('api', []): problems.append(f'an API section for {a["name"]}, not a user-facing name of this page'); continue
        obj = resolve(a['name'])
        short = a['name'].split('.')[-1]
        if inspect.isclass(obj) and not a['signature'].startswith(f'class {short}('): problems.append(f'{a["name"]} is not shown as a class: {a["signature"][:60]!r}')
        params = parameters(obj)
        if params:
            missing = [p for p in params if p not in (a['rows'] or [])]
            if missing: problems.append(f'{a["name"]}: no table row for {missing}')
    # outputs
    for out in facts['stderr']: problems.append(f'stderr output: {out[:120]!r}')
    for out in facts['outputs']:
        for pattern, what in PROBLEM_TEXT:
            m = re.search(pattern, out)
            if m: problems.append(f'{what} in an output: ...{out[max(0, m.start()-60):m.end()+60]!r}...')
    # prose and code too: a reader copies commands, and a path of the machine that built the site is no use to them
    m = re.search(MACHINE_PATH, facts['page_text'])
    if m: problems.append(f"a machine path in the page's text: ...{facts['page_text'][max(0, m.start()-60):m.end()+40]!r}...")
    for block in facts['prose']:
        m = re.search(r'\]\(', block)
        if m: problems.append(f'a markdown link left as text: ...{block[max(0, m.start()-60):m.end()+40]!r}...')
    for out in facts['pre_outputs']:
        if re.search(r'train_loss\s+valid_loss', out): problems.append(f'a training table as text: {out[:80]!r}')
    for table in facts['tables']:
        problems += [f'table numbers: {p}' for p in number_problems(table)]
    # code a reader sees: how to use the library, not tests; a GPU cell with what it gives
    lines = [l for block in facts['code'] for l in block.splitlines() if l.strip() and not l.strip().startswith('#')]
    asserts = [l for l in lines if ASSERTION.match(l)]
    if lines and len(asserts) > max(1, len(lines)//10): problems.append(f'{len(asserts)} of {len(lines)} visible code lines are assertions (at most one in ten)')
    for cell in facts['gpu_cells']:
        if not cell['outputs']:
            problems.append(f'GPU code shown without its results (run the page on a GPU with `bash tools/docs.sh --execute`, '
                            f'or move it to the benchmarks): {cell["code"][:70]!r}')
    # plots and links
    broken = [i['src'] for i in facts['images'] if not i['ok']]
    if broken: problems.append(f'images that do not load: {broken}')
    if len(facts['images']) < want.get('plots', 0): problems.append(f'{len(facts["images"])} plots, expected at least {want["plots"]}')
    for href in facts['links']:
        if href.startswith(('http', 'mailto:')) : continue
        target = href.split('#')[0]
        if target.endswith('.ipynb') or (target and not (folder/target).exists()): problems.append(f'a broken link: {href}')
    problems += fragment_problems(facts['links'], facts['ids'], folder)
    return [f'{name}: {p}' for p in dict.fromkeys(problems)]


def narrow_problems(browser, name):
    "The page in a window 400 px wide: nothing wider than the window, the text across it, not under the navigation"
    browser.width(NARROW_PX)
    facts = browser.js(NARROW)
    problems = []
    if facts['width'] > NARROW_PX + 1: problems.append(f'at {NARROW_PX} px wide the page is {facts["width"]} px wide (it scrolls sideways)')
    if facts['main_left'] is None or facts['main_width'] < NARROW_PX * 0.8:
        problems.append(f'at {NARROW_PX} px wide the text is {facts["main_width"]:.0f} px of the window, from x={facts["main_left"]}')
    if not all(facts['readable']): problems.append(f'at {NARROW_PX} px wide something covers the text (text at x=20, 200, 380: {facts["readable"]})')
    return [f'{name}: {p}' for p in problems]


# ---------------------------------------------------------------- checks of the notebooks behind the pages (no browser)
def cell_names(code):
    "(names a cell binds at its top level, names it reads from outside, modules it star-imports)"
    import ast, builtins, symtable
    code = '\n'.join(l for l in code.splitlines() if not l.lstrip().startswith(('#|', '%', '!')))
    try: tree, table = ast.parse(code), symtable.symtable(code, '<cell>', 'exec')
    except SyntaxError: return set(), set(), []
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    used = set()
    def walk(t, top):
        for s in t.get_symbols():
            if s.is_referenced() and (top or s.is_global()): used.add(s.get_name())
        for c in t.get_children(): walk(c, False)
    walk(table, True)
    stars = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and any(a.name == '*' for a in n.names)]
    return bound, used - bound - set(dir(builtins)), stars


def module_names(module):
    "What `from module import *` binds (None: the module cannot be imported here)"
    try: m = importlib.import_module(module)
    except Exception: return None
    return set(getattr(m, '__all__', None) or [n for n in dir(m) if not n.startswith('_')])


SHOW_DOC = re.compile(r'^show_doc', re.M)     # nbdev shows what show_doc writes, not its call
IPYTHON = {'display', 'get_ipython'}          # what a notebook has without an import


def hidden_names(nb):
    """Names the page's visible code uses but only its hidden cells bind: an example a reader cannot run from what the
    page shows. Hidden: `#| hide`, `include: false`, `echo: false`. Bound: imports, definitions and assignments, and what
    a star import of a fastaccum module brings. A star import of another library (fastai's, in a hidden cell too) is
    taken as read, as on docs.fast.ai: what it brings is not reported. Names of the library (exported cells,
    `fastaccum.all`) are the page's subject, not hidden."""
    hidden, visible_bound, visible_used, stars_read = {}, set(), {}, []
    def first_line(src, name=None):
        lines = [l.strip() for l in src.splitlines() if l.strip() and not l.lstrip().startswith('#|')]
        hit = [l for l in lines if name and re.search(rf'\b{re.escape(name)}\b', l)]
        return (hit or lines or [''])[0]
    for c in nb['cells']:
        if c['cell_type'] != 'code': continue
        src = ''.join(c['source']); d = directives(src)
        bound, used, stars = cell_names(src)
        stars_read += [s for s in stars if not s.startswith('fastaccum')]
        if 'hide' in d or d.get('include', '').lower() == 'false' or d.get('echo', '').lower() == 'false' or SHOW_DOC.search(src):
            for n in bound: hidden.setdefault(n, first_line(src, n))
            for s in stars:
                if s.startswith('fastaccum.') and s != 'fastaccum.all':
                    for n in (module_names(s) or ()): hidden.setdefault(n, f'from {s} import *')
        elif d.keys() & {'export', 'exporti'}: visible_bound |= bound   # the library's own code
        else:
            visible_bound |= bound
            for n in used: visible_used.setdefault(n, first_line(src)[:60])
    provided = set(visible_bound) | IPYTHON | (module_names('fastaccum.all') or set())
    for s in stars_read: provided |= module_names(s) or set()
    return {n: (hidden[n], visible_used[n]) for n in sorted(visible_used) if n in hidden and n not in provided}


def quarto_problems(config):
    "What the published (Quarto) site would lack of the navigation this site has: `config` is nbs/_quarto.yml, read"
    html_format, website = (config.get('format') or {}).get('html') or {}, config.get('website') or {}
    problems = []
    if not html_format.get('toc'): problems.append('nbs/_quarto.yml: no table of contents on the published site (format: html: toc: true)')
    if not website.get('page-navigation'): problems.append('nbs/_quarto.yml: no previous/next links on the published site (website: page-navigation: true)')
    if not (website.get('navbar') or {}).get('search'): problems.append('nbs/_quarto.yml: no search box on the published site (website: navbar: search: true)')
    return problems


def source_problems(pages):
    "What the notebooks behind the pages (and the published site's configuration) get wrong, found without a browser"
    import yaml
    problems = quarto_problems(yaml.safe_load((nbs_dir/'_quarto.yml').read_text()))
    hashes = json.loads(record.read_text()) if record.exists() else {}
    internal = [n for n, *_ in pages if '/' in n]   # internals/ and tests/ hold no pages
    if internal: problems.append(f'internal pages on the site: {internal}')
    for nb_name, name, _ in pages:
        nb = json.loads((nbs_dir/nb_name).read_text())
        if hashes.get(nb_name) != code_hash(nb):
            problems.append(f'{nb_name}: its saved outputs are not from its current code (and, if it reads them, the benchmark results): '
                            f'run `bash tools/docs.sh --execute nbs/{nb_name}`')
        for n, (bound_by, used_in) in hidden_names(nb).items():
            problems.append(f'{name}: an example uses `{n}` (in `{used_in}`), which only a hidden cell defines (`{bound_by[:70]}`): '
                            f'show the import or definition')
    return problems


def check(pages):
    "Open each page as a reader would, wide and 400 px wide; return the problems found"
    problems, shots = [], site/'screenshots'
    shots.mkdir(exist_ok=True); (shots/'narrow').mkdir(exist_ok=True)
    order = [name for _, name, _ in pages]
    browser = Browser()
    try:
        for nb_name, name, title in pages:
            browser.open((site/name).as_uri())
            problems += check_page(browser, nb_name, name, title, order)
            browser.screenshot(shots/name.replace('.html', '.png'))
            problems += narrow_problems(browser, name)
            browser.screenshot(shots/'narrow'/name.replace('.html', '.png'), width=NARROW_PX)
            browser.width(None)
    finally: browser.close()
    return problems


# ---------------------------------------------------------------- the check's own test
def bad_page():
    "A page with every problem the first site had (issues: documentation a fastai user wants to read; a fresh machine)"
    import nbformat
    from nbformat.v4 import new_notebook, new_markdown_cell as md, new_code_cell as code, new_output as output
    def cell(src, *outputs): c = code(src); c.outputs = list(outputs); return c
    frames = "['\u2588\\r', 'epoch     train_loss  valid_loss  time\\r', 'Epoch 1/3 : |----------| 0.00% [0/3]\\r']"
    show_doc = '### GradientAccumulation\n\n```python\ndef GradientAccumulation(\n    accum_bs:int|None=None, # Samples per step\n)\n```'
    helper = '### prepare_lr_finder\n\n```python\ndef prepare_lr_finder(learn, lr_finder)\n```'
    schedule = ('### GradientAccumulationSchedule.preview\n\n| | **Type** | **Default** |\n|--|--|--|\n'
                '| **schedule** | Callable | `<function SchedCos at 0x7fea1f5db920>` |')
    numbers = pd_table([['speed', '0.04064400494098663', '64.00'], ['ratio', '5.06e-02', '128.00'], ['other', '0.05', '256.00']])
    nb = new_notebook(cells=[
        md('A [dead link](missing.html) and a [notebook link](10_accumulate.ipynb).'),
        md('Run `.venv/bin/python bench.py`; the \\[GradientAccumulation page\\](accumulate.html) has them all.'),
        md('## Its one section\n\nThe details are in [GradientAccumulation](#gradientaccumulation), [its section](#no-such-section) '
           'and [the other page](index.html#nowhere).'),
        md('The noise scale $$B_{simple} = \\frac{\\operatorname{tr}(\\Sigma)}{|G|^2}$$ and $|G|^2$.'),
        cell('learn.fit(3)', output('stream', name='stdout', text=frames)),
        cell('learn.fit(1)', output('stream', name='stdout', text='epoch     train_loss  valid_loss  time\n0         0.5         0.4         00:01\n')),
        cell('import wandb', output('stream', name='stderr', text='/tmp/ipykernel_7/1.py:3: UserWarning: You are shadowing an attribute (scaler)')),
        cell('fit_wandb()', output('stream', name='stdout', text='Could not gather input dimensions\n')),
        cell('show_doc(GradientAccumulation)', output('display_data', data={'text/markdown': show_doc})),
        cell('show_doc(prepare_lr_finder)', output('display_data', data={'text/markdown': helper})),
        cell('show_doc(GradientAccumulationSchedule.preview)', output('display_data', data={'text/markdown': schedule})),
        cell('table', output('display_data', data={'text/html': numbers})),
        cell('\n'.join(['x = 1', 'y = 2', 'assert x == 1', 'test_eq(y, 2)', 'test_close(x, 1)'])),
        cell('#| cuda\nlearn = synth_learner(cbs=GradientAccumulation(micro_batch_size="auto"))\nlearn.fit(1)'),
        cell('wide = "' + 'x' * 150 + '"'),
        md('<table><tr>' + '<td>a&nbsp;wide&nbsp;column&nbsp;of&nbsp;a&nbsp;table</td>' * 6 + '</tr></table>'),
        md('<div style="position: absolute; width: 900px">A block wider than a phone, out of any scrolling box.</div>'),
    ])
    return nbformat.from_dict(nb)


def bad_notebook():
    "A notebook whose examples call a helper only a hidden cell imports, as six pages did"
    return {'cells': [
        {'cell_type': 'code', 'source': '#| hide\nimport warnings\nfrom fractions import Fraction\nfrom fastaccum.testing import *\nfrom fastai.basics import *'},
        {'cell_type': 'code', 'source': '#| hide\ndef helper(): return 1'},
        {'cell_type': 'code', 'source': 'x = helper()\nlearn = synth_learner(x, y, 16)\nwith warnings.catch_warnings(): learn.fit(1)\n'
                                        'learn2 = Learner(dls, model)\nprint(rel_diff(learn.model, learn2.model), Fraction(1, 3))'},
        {'cell_type': 'code', 'source': 'show_doc(tiny_mlp)'},
        {'cell_type': 'code', 'source': 'from fastaccum.testing import rel_diff\ny = 1'},
    ]}


def pd_table(rows):
    return '<table><thead><tr><th>what</th><th>value</th><th>count</th></tr></thead><tbody>' + \
           ''.join('<tr>' + ''.join(f'<td>{v}</td>' for v in r) + '</tr>' for r in rows) + '</tbody></table>'


# Each kind of problem the check must report on the self-test's pages: the first site's, and the fresh machine's
SELF_TEST_EXPECTS = ['progress-bar frames', 'a training table as text', 'stderr output', 'a warning', 'a logger complaint',
                     'a machine path', 'is not shown as a class', 'no table row for', 'not a user-facing name', 'long numbers',
                     'a column mixes', 'integers printed as', 'visible code lines are assertions', 'a broken link: missing.html',
                     'a broken link: 10_accumulate.ipynb', 'navigation', "a machine path in the page's text", 'a markdown link left as text',
                     'no API section for GradientAccumulation.count_samples',
                     # a fresh machine and a browser
                     'a link to a fragment that is not there: #gradientaccumulation', 'a link to a fragment that is not there: #no-such-section',
                     'a link to a fragment that is not there: index.html#nowhere', "its <title> is 'Notebook'", 'no table of contents',
                     'previous/next links are None/None', 'no search box', 'needs the network: https://cdnjs', 'maths left as TeX',
                     'an object address', 'GPU code shown without its results', f'at {NARROW_PX} px wide the page is',
                     f'at {NARROW_PX} px wide the text is', 'hidden: `synth_learner`', 'hidden: `Fraction`', 'hidden: `helper`',
                     'no table of contents on the published site', 'no previous/next links on the published site',
                     'no search box on the published site', 'stale: the benchmark results changed']
# ... and what it must not report there: a name the page imports visibly, one fastai's star import brings (also when a
# hidden cell imports it), one of show_doc's calls (nbdev shows their output, not the call)
SELF_TEST_SPARES = ['hidden: `rel_diff`', 'hidden: `Learner`', 'hidden: `y`', 'hidden: `warnings`', 'hidden: `tiny_mlp`']


def self_test():
    """The check must find every problem of pages made of them: render `bad_page` as the first site rendered pages, check
    it, and check `bad_notebook`'s hidden names; a page of the current renderer with a dead fragment must draw that too"""
    found = [f'hidden: `{n}`' for n in hidden_names(bad_notebook())]
    found += quarto_problems({'format': {'html': {'theme': 'cosmo'}}, 'website': {'navbar': {'background': 'primary'}}})
    with tempfile.TemporaryDirectory() as tmp:   # a page showing benchmark numbers goes stale when the results change
        reads = {'cells': [{'cell_type': 'code', 'source': "json.loads(Path('bench/results/results.json').read_text())"}]}
        (Path(tmp)/'results.json').write_text('{"ddp": [0.608, 0.911]}'); before = code_hash(reads, tmp)
        (Path(tmp)/'results.json').write_text('{"ddp": [1.087, 1.440]}')
        if code_hash(reads, tmp) != before: found.append('stale: the benchmark results changed')
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pages = [(None, '10_accumulate.ipynb', 'Gradient accumulation'), (None, 'index.ipynb', 'fastaccum')]   # out of order
        write_page(folder/'index.html', bad_page(), {'title': 'fastaccum'}, {}, pages[::-1])
        write_page(folder/'accumulate.html', bad_page(), {'title': 'Gradient accumulation'}, {}, pages, first_site=True)
        browser = Browser()
        try:
            browser.open((folder/'accumulate.html').as_uri())
            found += check_page(browser, '10_accumulate.ipynb', 'accumulate.html', 'Gradient accumulation', ['index.html', 'accumulate.html'], folder)
            found += narrow_problems(browser, 'accumulate.html')
            browser.width(None)
            browser.open((folder/'index.html').as_uri())   # today's renderer: its own dead fragments still found
            current = check_page(browser, 'index.ipynb', 'index.html', 'fastaccum', ['index.html', 'accumulate.html'], folder)
        finally: browser.close()
    missed = [e for e in SELF_TEST_EXPECTS if not any(e in p for p in found)]
    missed += [f'not {s}' for s in SELF_TEST_SPARES if any(s in p for p in found)]
    if not any('a link to a fragment that is not there: #no-such-section' in p for p in current): missed.append('a dead fragment on a current page')
    return missed, found


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--execute', nargs='*', metavar='NB', help='run these pages (default: all) in a Jupyter kernel first, saving their outputs')
    ap.add_argument('--execute-one', help=argparse.SUPPRESS)
    ap.add_argument('--check', action='store_true', help='open every page in headless Chromium and check it (the check tests itself first)')
    args = ap.parse_args()
    if args.execute_one: execute_one(Path(args.execute_one)); sys.exit(0)
    if args.execute is not None: execute([Path(n).name for n in args.execute] or [n for _, n in sidebar()])
    browser = args.check and chromium()
    if browser:
        missed, found = self_test()
        if missed: sys.exit(f'the check itself is broken: on pages made of problems it missed {missed}; it found:\n' + '\n'.join(found))
        print(f'the check finds all {len(SELF_TEST_EXPECTS)} kinds of problem on pages made of them')
    pages = build()
    print(f'built {len(pages)} pages in {site}')
    if args.check:
        problems = source_problems(pages)
        if not browser:
            print('\n'.join(problems) if problems else f'the notebooks behind the {len(pages)} pages check out')
            if problems: sys.exit(f'{len(problems)} problems in the notebooks behind the pages (above); Chromium is not installed, '
                                  f'so the pages were not opened')
            print(f'SKIPPED: Chromium is not installed, so the pages were built but not opened: {INSTALL_CHROMIUM}')
            sys.exit(77)
        problems += check(pages)
        print('\n'.join(problems) if problems else f'all {len(pages)} pages read as they should; screenshots in {site/"screenshots"}')
        if problems: sys.exit(f'{len(problems)} problems (above); screenshots in {site/"screenshots"}')
