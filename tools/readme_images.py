"""The README's images of the demo (the "Is it really the large batch?" section of nbs/index.ipynb): its plot of every
optimizer step's loss and its table, as PNGs in docs/images/, which the README links with absolute URLs, so that the
package's page on PyPI (which has none of the repository's files) shows them. Run again when the demo changes:
    python tools/readme_images.py
"""
from pathlib import Path
import matplotlib; matplotlib.use('Agg')
import matplotlib.pyplot as plt
from fastaccum.demo import run_demo

root = Path(__file__).resolve().parent.parent
FORMATS = {'max_weight_diff': '{:.1e}', 'valid_loss': '{:.4f}', 'accuracy': '{:.3f}', 'seconds': '{:.1f}'}

def table_png(table, out):
    "`table` drawn as a PNG, formatted as the home page prints it"
    rows = table.astype(object).to_dict('records')   # ints stay ints
    cells = [[FORMATS.get(c, '{}').format(v) for c, v in row.items()] for row in rows]
    fig, ax = plt.subplots(figsize=(10, 1.1)); ax.axis('off')
    t = ax.table(cellText=cells, rowLabels=list(table.index), colLabels=list(table.columns), loc='center',
                 cellLoc='right')
    t.auto_set_font_size(False); t.set_fontsize(10); t.scale(1, 1.4)
    fig.savefig(out, dpi=100, bbox_inches='tight'); plt.close(fig)

if __name__ == '__main__':
    images = root/'docs'/'images'
    images.mkdir(exist_ok=True)
    table = run_demo(epochs=3, out=str(images/'demo_loss.png'))
    table_png(table, images/'demo_table.png')
    print(table.to_string(formatters={c: f.format for c, f in FORMATS.items()}))
