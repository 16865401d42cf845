"""The docs site in `_site/`, built without Quarto (which cannot be installed here), and its reader's check.

    python tools/render_docs.py                  # build _site/ from the notebooks' saved outputs (open _site/index.html)
    python tools/render_docs.py --execute [NB]   # first run the pages (all, or those named) in a Jupyter kernel, saving outputs
    python tools/render_docs.py --check          # build, then open every page in headless Chromium and check it

`bash tools/docs.sh` runs this in the project's environment, set up first.

Outputs. The pages show the outputs saved in the notebooks, as Quarto does on the published site. `--execute`
runs each page with nbclient in an ipykernel kernel, so fastai's progress and results are saved as the HTML tables
docs.fast.ai shows (not console frames), then cleans the notebook with nbdev-clean. The vision recipe runs in
`.venv-vision` (torchvision; `tools/setup_vision.sh`); cells flagged `cuda` are left unrun on a machine without a
GPU. `tools/executed.json` records a hash of each page's code as it was run: the check fails on a page whose code
changed since, so outputs cannot go stale unnoticed.

Pages. nbdev processes the notebooks as for Quarto (`proc_nbs`: `show_doc` sections, cell directives, hidden
cells removed); each page of `nbs/sidebar.yml` becomes one HTML page named as nbdev names it
(`10_accumulate.ipynb` -> `accumulate.html`), with the sidebar's sections as navigation. The GitHub deploy
workflow builds the real Quarto site from the same notebooks and the same sidebar.

`--check` is the reader's test. In headless Chromium (over its DevTools protocol), each page must show a title,
its API sections as docs.fast.ai does (only user-facing names; a class as `class`; a table row for every
parameter), its plots, and working links; and nowhere: error output, stderr (warnings, logger complaints),
progress-bar frames, training tables as text, machine paths (in outputs, prose or code), markdown links left as
text, long or mixed number formats, or more than one visible line in ten an assertion. The navigation must be the sidebar's reading order, with no internal pages.
A full-page screenshot of each page goes to `_site/screenshots/`. Before the site, the check tests itself: a page
made of every problem the first site had (progress frames, warnings, paths, `def Class(`, helpers as API, a missing
parameter table, long and mixed numbers, assertions, dead links, navigation out of order) must draw each complaint.
"""
import argparse, hashlib, html, importlib, inspect, json, os, re, shutil, socket, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

root = Path(__file__).resolve().parent.parent
nbs_dir, site, proc = root/'nbs', root/'_site', root/'_proc'
record = root/'tools'/'executed.json'
SITE_URL = 'https://fastaccum.github.io/fastaccum/'
SKIP_FLAGS = {'cuda'}   # cells that need hardware this machine may lack: left unrun by --execute

# What a reader must find on each page: its API sections (user-facing names only; any other is an error) and
# the least number of plots. Pages not listed have neither.
EXPECTED = {
    'index.ipynb': dict(plots=1),
    '01_tutorial.ipynb': dict(plots=4),
    '02_recipes.ipynb': dict(plots=1),
    '03_vision.ipynb': dict(plots=1),
    '10_accumulate.ipynb': dict(api=['GradientAccumulation', 'GradientAccumulation.count_samples',
                                     'GradientAccumulation.step_position', 'loss_reduction']),
    '12_schedule.ipynb': dict(api=['GradientAccumulationSchedule', 'GradientAccumulationSchedule.scheduled_bs',
                                   'GradientAccumulationSchedule.in_use_bs', 'GradientAccumulationSchedule.preview',
                                   'GradientAccumulationSchedule.plot_schedule'], plots=2),
    '13_micro_batch.ipynb': dict(api=['split_sizes', 'slice_batch', 'is_out_of_memory', 'OutOfMemoryElsewhere']),
    '14_noise_scale.ipynb': dict(api=['GradientNoiseScale', 'noise_scale_estimates', 'GradientNoiseScale.plot_gns'], plots=1),
    '20_integrations.ipynb': dict(api=['BatchCallback', 'StepLoggers'], plots=1),
    '21_distributed.ipynb': dict(api=['ddp_world_size', 'all_reduce_sums', 'all_reduce_gradients', 'no_sync_model', 'is_fsdp',
                                      'fix_distributed_dl_broadcast']),
    '22_checkpoint.ipynb': dict(api=['save_checkpoint_file', 'load_checkpoint_file', 'CheckpointError', 'numbered_path', 'remove_partial_writes',
                                     'TrainingCheckpoint'], plots=1),
    '31_benchmarks.ipynb': dict(plots=3),
    '40_window.ipynb': dict(api=['AccumWindow', 'AccumWindow.plan', 'AccumWindow.weight', 'AccumWindow.close',
                                 'AccumWindow.add', 'AccumWindow.mean_loss', 'plan_epoch']),
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


def code_hash(nb):
    "What a page's outputs depend on: its code cells"
    code = '\n#-----\n'.join(''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'code')
    return hashlib.sha1(code.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- --execute
def skipped(src):
    d = directives(src)
    return bool(SKIP_FLAGS & set(d)) or d.get('eval', '').lower() == 'false'


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
        if original.cell_type == 'code':
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
CSS = '''<style>
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
</style>'''


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


def prepare(nb, meta, names):
    import nbformat
    "Turn a processed notebook into one nbconvert renders as the page a reader should see"
    cells = []
    if meta.get('title'):
        head = f"# {meta['title']}" + (f"\n\n> {meta['description']}" if meta.get('description') else '')
        cells.append(nbformat.v4.new_markdown_cell(head))
    for c in nb['cells']:
        src = c['source']
        c['metadata'] = {}   # nbdev's processing leaves timings there that nbformat's schema refuses
        if c['cell_type'] == 'markdown': c['source'] = local_links(src, names)
        elif c['cell_type'] == 'code':
            d = directives(src)
            c['source'] = '\n'.join(l for l in src.splitlines() if not l.startswith('#|')).strip()
            if d.get('echo', '').lower() == 'false': c['metadata']['tags'] = ['remove_input']
            if d.get('output', '').lower() == 'false': c['outputs'] = []
            for o in c.get('outputs', []):   # show_doc's markdown: its links too
                if 'text/markdown' in o.get('data', {}): o['data']['text/markdown'] = local_links(o['data']['text/markdown'], names)
            if not c['source'] and not c.get('outputs'): continue
        elif c['cell_type'] == 'raw': continue
        cells.append(c)
    nb['cells'] = cells
    return nb


def nav_html(pages, current):
    out, last = ['<nav id="fa-nav">'], None
    for section, nb_name, title in pages:
        if section != last and section: out.append(f'<div class="section">{html.escape(section)}</div>')
        last = section
        name = page_name(nb_name)
        out.append(f'<a href="{name}"{" class=current" if name == current else ""}>{html.escape(title)}</a>')
    return ''.join(out) + '</nav>'


def build():
    "Process the notebooks with nbdev, and write one HTML page per sidebar entry into `_site/`"
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
    for section, nb_name, nb, meta in loaded: write_page(site/page_name(nb_name), nb, meta, names, pages)
    return [(nb_name, page_name(nb_name)) for _, nb_name, _, _ in loaded]


def write_page(path, nb, meta, names, pages):
    "One processed notebook as an HTML page, with the site's navigation"
    from nbconvert import HTMLExporter
    from traitlets.config import Config
    config = Config()
    config.TagRemovePreprocessor.remove_input_tags = ('remove_input',)
    config.TagRemovePreprocessor.enabled = True
    config.HTMLExporter.exclude_input_prompt = config.HTMLExporter.exclude_output_prompt = True
    body, _ = HTMLExporter(config=config, template_name='lab').from_notebook_node(prepare(nb, meta, names))
    chrome = f'<div id="fa-top"><a href="index.html">fastaccum</a></div>{nav_html(pages, path.name)}<div id="fa-main">'
    body = body.replace('</head>', CSS + f'<title>{html.escape(meta.get("title", ""))} – fastaccum</title></head>', 1)
    body = re.sub(r'(<body[^>]*>)', lambda m: m.group(1) + chrome, body, count=1)
    body = body.replace('</body>', '</div></body>', 1)
    path.write_text(body)


# ---------------------------------------------------------------- --check, in Chromium over its DevTools protocol
def chromium():
    return shutil.which('chromium') or shutil.which('chromium-browser')


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
        return self.call('Runtime.evaluate', expression=expr, returnByValue=True)['result'].get('value')

    def screenshot(self, path):
        import base64
        data = self.call('Page.captureScreenshot', format='png', captureBeyondViewport=True,
                         clip=dict(x=0, y=0, width=1280, height=min(self.js('document.body.scrollHeight'), 30000), scale=1))['data']
        Path(path).write_bytes(base64.b64decode(data))

    def close(self):
        self.ws.close(); self.proc.kill(); self.proc.wait(); shutil.rmtree(self.profile, ignore_errors=True)


# What the page's JavaScript reads off the rendered DOM
PAGE_FACTS = r'''(() => {
  const text = e => e.innerText;
  const outputs = [...document.querySelectorAll('.jp-OutputArea-output')];
  const api = [...document.querySelectorAll('.jp-OutputArea-output h3, .jp-OutputArea-output h4')].map(h => {
    const out = h.closest('.jp-OutputArea-output');
    const pre = out.querySelector('pre'), table = out.querySelector('table');
    return {name: h.innerText.replace(/¶/g, '').trim(), signature: pre ? pre.innerText : '',
            rows: table ? [...table.querySelectorAll('tbody tr')].map(r => r.cells[0].innerText.trim()) : null};
  });
  return {
    title: [...document.querySelectorAll('h1')].map(text),
    page_text: document.querySelector('#fa-main').innerText,
    prose: [...document.querySelectorAll('.jp-MarkdownCell')].map(text),
    nav: [...document.querySelectorAll('#fa-nav a')].map(a => a.getAttribute('href')),
    links: [...document.querySelectorAll('#fa-main a[href]')].map(a => a.getAttribute('href')),
    images: [...document.querySelectorAll('#fa-main img')].map(i => ({src: i.getAttribute('src').slice(0, 40), ok: i.complete && i.naturalWidth > 0})),
    code: [...document.querySelectorAll('.jp-InputArea-editor')].map(text),
    stderr: outputs.filter(o => o.getAttribute('data-mime-type') === 'application/vnd.jupyter.stderr').map(text),
    outputs: outputs.map(text),
    pre_outputs: outputs.filter(o => o.querySelector('pre')).map(text),
    tables: [...document.querySelectorAll('.jp-OutputArea-output table')].filter(t => !t.closest('.jp-OutputArea-output').querySelector('h3, h4'))
              .map(t => [...t.querySelectorAll('tbody tr')].map(r => [...r.cells].map(text))),
    api: api,
  };
})()'''

MACHINE_PATH = r'(/work/|/tmp/|/home/|/root/|/usr/|/opt/|site-packages|\.venv)'
PROBLEM_TEXT = [   # in any output: (pattern, what it is)
    (r'Traceback \(most recent call last\)|\w+Error: ', 'error output'),
    (r'Warning\b|warnings\.warn|<ipython-input|/ipykernel_\d+/', 'a warning'),
    (r'Could not gather|could not log|shadowing an attribute|wandb: ', 'a logger complaint'),
    (r'█|\r|Epoch \d+/\d+ :|\|-{5,}', 'progress-bar frames'),
    (MACHINE_PATH, 'a machine path'),
]
ASSERTION = re.compile(r'^\s*(assert\b|test_\w+\(|test_fail\b)')


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


def check_page(browser, nb_name, name, nav_expected, folder=site):
    facts = browser.js(PAGE_FACTS)
    problems, want = [], EXPECTED.get(nb_name, {})
    if not facts['title']: problems.append('no title')
    if facts['nav'] != nav_expected: problems.append(f'navigation {facts["nav"]} is not the reading order {nav_expected}')
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
    # code a reader sees: how to use the library, not tests
    lines = [l for block in facts['code'] for l in block.splitlines() if l.strip() and not l.strip().startswith('#')]
    asserts = [l for l in lines if ASSERTION.match(l)]
    if lines and len(asserts) > max(1, len(lines)//10): problems.append(f'{len(asserts)} of {len(lines)} visible code lines are assertions (at most one in ten)')
    # plots and links
    broken = [i['src'] for i in facts['images'] if not i['ok']]
    if broken: problems.append(f'images that do not load: {broken}')
    if len(facts['images']) < want.get('plots', 0): problems.append(f'{len(facts["images"])} plots, expected at least {want["plots"]}')
    for href in facts['links']:
        if href.startswith(('http', 'mailto:')) : continue
        target = href.split('#')[0]
        if target.endswith('.ipynb') or (target and not (folder/target).exists()): problems.append(f'a broken link: {href}')
    return [f'{name}: {p}' for p in dict.fromkeys(problems)]


def check(pages):
    "Open each page as a reader would; return the problems found"
    problems, shots = [], site/'screenshots'
    shots.mkdir(exist_ok=True)
    hashes = json.loads(record.read_text()) if record.exists() else {}
    internal = [n for n, _ in pages if '/' in n]   # internals/ and tests/ hold no pages
    if internal: problems.append(f'internal pages on the site: {internal}')
    for nb_name, _ in pages:
        if hashes.get(nb_name) != code_hash(json.loads((nbs_dir/nb_name).read_text())):
            problems.append(f'{nb_name}: its saved outputs are not from its current code: run `bash tools/docs.sh --execute nbs/{nb_name}`')
    nav_expected = [name for _, name in pages]
    browser = Browser()
    try:
        for nb_name, name in pages:
            browser.open((site/name).as_uri())
            problems += check_page(browser, nb_name, name, nav_expected)
            browser.screenshot(shots/name.replace('.html', '.png'))
    finally: browser.close()
    return problems


# ---------------------------------------------------------------- the check's own test
def bad_page():
    "A page with every problem the first site had (issue: documentation a fastai user wants to read)"
    import nbformat
    from nbformat.v4 import new_notebook, new_markdown_cell as md, new_code_cell as code, new_output as output
    def cell(src, *outputs): c = code(src); c.outputs = list(outputs); return c
    frames = "['\u2588\\r', 'epoch     train_loss  valid_loss  time\\r', 'Epoch 1/3 : |----------| 0.00% [0/3]\\r']"
    show_doc = '### GradientAccumulation\n\n```python\ndef GradientAccumulation(\n    accum_bs:int|None=None, # Samples per step\n)\n```'
    helper = '### prepare_lr_finder\n\n```python\ndef prepare_lr_finder(learn, lr_finder)\n```'
    numbers = pd_table([['speed', '0.04064400494098663', '64.00'], ['ratio', '5.06e-02', '128.00'], ['other', '0.05', '256.00']])
    nb = new_notebook(cells=[
        md('A [dead link](missing.html) and a [notebook link](10_accumulate.ipynb).'),
        md('Run `.venv/bin/python bench.py`; the \\[GradientAccumulation page\\](accumulate.html) has them all.'),
        cell('learn.fit(3)', output('stream', name='stdout', text=frames)),
        cell('learn.fit(1)', output('stream', name='stdout', text='epoch     train_loss  valid_loss  time\n0         0.5         0.4         00:01\n')),
        cell('import wandb', output('stream', name='stderr', text='/tmp/ipykernel_7/1.py:3: UserWarning: You are shadowing an attribute (scaler)')),
        cell('fit_wandb()', output('stream', name='stdout', text='Could not gather input dimensions\n')),
        cell('show_doc(GradientAccumulation)', output('display_data', data={'text/markdown': show_doc})),
        cell('show_doc(prepare_lr_finder)', output('display_data', data={'text/markdown': helper})),
        cell('table', output('display_data', data={'text/html': numbers})),
        cell('\n'.join(['x = 1', 'y = 2', 'assert x == 1', 'test_eq(y, 2)', 'test_close(x, 1)'])),
    ])
    return nbformat.from_dict(nb)


def pd_table(rows):
    return '<table><thead><tr><th>what</th><th>value</th><th>count</th></tr></thead><tbody>' + \
           ''.join('<tr>' + ''.join(f'<td>{v}</td>' for v in r) + '</tr>' for r in rows) + '</tbody></table>'


SELF_TEST_EXPECTS = ['progress-bar frames', 'a training table as text', 'stderr output', 'a warning', 'a logger complaint',
                     'a machine path', 'is not shown as a class', 'no table row for', 'not a user-facing name', 'long numbers',
                     'a column mixes', 'integers printed as', 'visible code lines are assertions', 'a broken link: missing.html',
                     'a broken link: 10_accumulate.ipynb', 'navigation', "a machine path in the page's text", 'a markdown link left as text', 'no API section for GradientAccumulation.count_samples']


def self_test():
    "The check must find every problem of a page made of them: render `bad_page` as the site renders pages, and check it"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pages = [(None, '10_accumulate.ipynb', 'Gradient accumulation'), (None, 'index.ipynb', 'fastaccum')]   # out of order
        write_page(folder/'accumulate.html', bad_page(), {'title': 'A bad page'}, {}, pages)
        browser = Browser()
        try:
            browser.open((folder/'accumulate.html').as_uri())
            found = check_page(browser, '10_accumulate.ipynb', 'accumulate.html', ['index.html', 'accumulate.html'], folder)
        finally: browser.close()
    missed = [e for e in SELF_TEST_EXPECTS if not any(e in p for p in found)]
    return missed, found


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--execute', nargs='*', metavar='NB', help='run these pages (default: all) in a Jupyter kernel first, saving their outputs')
    ap.add_argument('--execute-one', help=argparse.SUPPRESS)
    ap.add_argument('--check', action='store_true', help='open every page in headless Chromium and check it (the check tests itself first)')
    args = ap.parse_args()
    if args.execute_one: execute_one(Path(args.execute_one)); sys.exit(0)
    if args.execute is not None: execute([Path(n).name for n in args.execute] or [n for _, n in sidebar()])
    if args.check and not chromium(): sys.exit('Chromium is not installed (apt-get install chromium): the site cannot be checked')
    if args.check:
        missed, found = self_test()
        if missed: sys.exit(f'the check itself is broken: on a page made of problems it missed {missed}; it found:\n' + '\n'.join(found))
        print(f'the check finds all {len(SELF_TEST_EXPECTS)} kinds of problem on a page made of them')
    pages = build()
    print(f'built {len(pages)} pages in {site}')
    if args.check:
        problems = check(pages)
        print('\n'.join(problems) if problems else f'all {len(pages)} pages read as they should; screenshots in {site/"screenshots"}')
        sys.exit(1 if problems else 0)
