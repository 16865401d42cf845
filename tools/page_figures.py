"""How long each page of the built site (`_site/`, bash tools/docs.sh) is to read, as a Markdown table: the words
of prose before its first example (the first code a reader can run: a code cell or a code block), where that
example starts at 1280x800 (px from the top, in headless Chromium; `first screen` when it is under 800), and the
words of prose on the page (code and outputs, show_doc's reference included, are not prose).
    python tools/page_figures.py [--cold SECONDS --warm SECONDS]     (the test command's times, for the table's foot)
"""
import argparse, os, re, sys, tempfile
from pathlib import Path

root = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(root/'docs'))
from pages import sidebar, page

CHROMIUM = os.environ.get('CHROMIUM', '/usr/bin/chromium')
FIGURES = """() => {
  const article = document.querySelector('article');
  const skip = 'div.highlight, .cell_output, div.cell, script, style, .headerlink, .copybtn';   // not prose
  const example = article.querySelector('div.cell_input, div.highlight-python, div.highlight-ipython3');
  let before = 0, all = 0, seen = false;
  const walk = n => {
    if (n === example) seen = true;
    if (n.nodeType === 3) {
      const w = (n.textContent.match(/[A-Za-z0-9][\\w'’.-]*/g) || []).length; all += w; if (!seen) before += w; return; }
    if (n.nodeType !== 1) return;
    if (n.matches(skip)) { if (n.contains(example)) seen = true; return; }
    for (const c of n.childNodes) walk(c); };
  walk(article);
  return {before, all, y: example ? Math.round(example.getBoundingClientRect().top + scrollY) : null}; }"""


def figures(site=root/'_site'):
    "{page: (words before the first example, y of that example in px or None, words of prose)}"
    from playwright.sync_api import sync_playwright
    out = {}
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        browser = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                      args=['--no-sandbox', '--disable-gpu'],
                                                      viewport={'width': 1280, 'height': 800})
        browser.route('**/*', lambda r: r.continue_() if r.request.url.startswith('file:') else r.abort())
        pg = browser.new_page()
        for _, nb in sidebar():
            pg.goto((site/f'{page(nb)}.html').as_uri())
            f = pg.evaluate(FIGURES)
            out[page(nb)] = (f['before'], f['y'], f['all'])
        browser.close()
    return out


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--cold', type=float); ap.add_argument('--warm', type=float)
    args = ap.parse_args()
    rows = figures()
    print('| page | words before the first example | first example at (1280x800) | words of prose |')
    print('|---|---:|---:|---:|')
    for name, (before, y, words) in rows.items():
        at = '-' if y is None else f'{y} px' + (' (first screen)' if y < 800 else '')
        print(f'| {name} | {before:,} | {at} | {words:,} |')
    if args.cold is not None or args.warm is not None:
        t = lambda s: '-' if s is None else f'{s / 60:.1f} min'
        print(f'\n`bash tools/test.sh` on 2 cores: {t(args.cold)} cold (nothing cached), '
              f'{t(args.warm)} warm (nothing changed)')
