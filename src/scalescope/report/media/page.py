"""The page every scalescope HTML output shares, readable offline.

plotly.js is inlined once, gzipped and base64-encoded (1.9 MB instead of 4.8 MB), in a
``<script type="application/octet-stream">`` block that the page inflates with the browser's
``DecompressionStream`` (Chrome/Edge 80, Firefox 113, Safari 16.4 and later; an older browser
gets a one-line note and the plain-HTML parts). Each chart's figure is a
``<script type="application/json">`` block that one small script hands to
``Plotly.newPlot``. No URL is referenced anywhere
outside plotly.js's own source (which holds map-tile and licence URLs that these charts never
fetch). Tables and text are plain HTML and work without JavaScript.

After every chart is drawn, the page writes ``<pre id="render-status">``: a JSON object with
the number of plotly SVG layers (``.main-svg``) per chart id, every error caught by
``window.onerror``, unhandled promise rejections and ``console.error``, and the resources
the page fetched (``performance`` resource entries: none is expected). The browser test reads
it from the DOM; a person can ignore it (it is hidden).
"""

from __future__ import annotations

import base64
import gzip
import html
from collections.abc import Iterable
from functools import lru_cache

from plotly.offline import get_plotlyjs

from scalescope.report.document import Chart

STATUS_ID = "render-status"
PLOTLY_ID = "plotly-gz"

CSS = """
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:1em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:1em}
.card{border:1px solid #ccc;border-radius:6px;padding:.6em 1em;background:#fafafa}
.card table.grid th{text-align:left}.card table.grid td{overflow-wrap:anywhere}
.note{color:#666;font-style:italic}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ddd;padding:2px 8px}
td.num{text-align:right;font-variant-numeric:tabular-nums}th{background:#f0f0f0}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.5em}.chart{min-height:200px}
.bold{font-weight:600}.red{color:#b22}.yellow{color:#a60}.green{color:#282}
.blue{color:#24b}.magenta{color:#a2a}table.grid caption{text-align:left;font-weight:600}
"""

HOOK_JS = """
window.__scalescope = {errors: []};
(function (s) {
  var original = console.error;
  console.error = function () {
    s.errors.push(Array.prototype.map.call(arguments, String).join(" "));
    return original.apply(console, arguments);
  };
  window.addEventListener("error", function (e) { s.errors.push("error: " + e.message); });
  window.addEventListener("unhandledrejection", function (e) {
    s.errors.push("unhandled rejection: " + String(e.reason));
  });
})(window.__scalescope);
"""

RENDER_JS = """
(function (s) {
  var charts = {}, plots = [];
  var divs = document.querySelectorAll("[data-chart]");
  function report() {
    divs.forEach(function (d) { charts[d.id] = d.querySelectorAll(".main-svg").length; });
    var fetched = performance.getEntriesByType("resource").map(function (e) { return e.name; });
    document.getElementById("__STATUS__").textContent =
      JSON.stringify({charts: charts, errors: s.errors, resources: fetched, done: true});
  }
  function loadPlotly() {
    if (typeof DecompressionStream === "undefined") {
      return Promise.reject(new Error("this browser cannot inflate the charts' plotly.js " +
        "(no DecompressionStream): open the file in a recent Chrome, Edge, Firefox or Safari"));
    }
    var packed = atob(document.getElementById("__PLOTLY__").textContent.trim());
    var bytes = new Uint8Array(packed.length);
    for (var i = 0; i < packed.length; i++) { bytes[i] = packed.charCodeAt(i); }
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(function (js) {
      var tag = document.createElement("script");
      tag.textContent = js;
      document.head.appendChild(tag);
    });
  }
  function draw() {
    divs.forEach(function (d) {
      try {
        var fig = JSON.parse(document.getElementById(d.id + "-data").textContent);
        var config = {displaylogo: false, responsive: true};
        plots.push(Plotly.newPlot(d, fig.data, fig.layout, config).catch(function (e) {
          s.errors.push(d.id + ": " + e);
        }));
      } catch (e) { s.errors.push(d.id + ": " + e); }
    });
    return Promise.all(plots);
  }
  function unavailable(e) {
    var note = document.createElement("p");
    note.className = "note";
    note.textContent = String(e.message || e);
    document.body.insertBefore(note, document.body.firstChild);
    s.errors.push(String(e));
  }
  loadPlotly().then(draw, unavailable).then(report, report);
})(window.__scalescope);
""".replace("__STATUS__", STATUS_ID).replace("__PLOTLY__", PLOTLY_ID)


@lru_cache(maxsize=1)
def plotly_payload() -> str:
    """plotly.js gzipped (deterministically: no timestamp) and base64-encoded."""
    packed = gzip.compress(get_plotlyjs().encode("utf-8"), compresslevel=9, mtime=0)
    return base64.b64encode(packed).decode("ascii")


def esc(value: object) -> str:
    return html.escape(str(value))


def json_for_script(text: str) -> str:
    """JSON made safe inside ``<script>``: no ``<``, ``>``, ``&`` or JS line separators."""
    for char, escaped in (
        ("&", "\\u0026"),
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


def chart_html(chart: Chart) -> str:
    """A chart's heading and div with its figure's JSON, or the note when it has none."""
    title = f"<h2>{html.escape(chart.title)}</h2>"
    if chart.figure is None:
        return f'{title}<p class="note" id="{chart.chart_id}-note">{html.escape(chart.note)}</p>'
    data = json_for_script(chart.figure.to_json())
    return (
        f'{title}<div class="chart" id="{chart.chart_id}" data-chart></div>\n'
        f'<script type="application/json" id="{chart.chart_id}-data">{data}</script>'
    )


def page(title: str, body: Iterable[str]) -> str:
    """The whole document: styles, the error hook, plotly.js, the body, the render script."""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{html.escape(title)}</title>",
            f"<style>{CSS}</style>",
            f"<script>{HOOK_JS}</script>",
            f'<script type="application/octet-stream" id="{PLOTLY_ID}">{plotly_payload()}</script>',
            "</head><body>",
            "<noscript><p>Charts need JavaScript; the summary and tables do not.</p></noscript>",
            *body,
            f'<pre id="{STATUS_ID}" hidden></pre>',
            f"<script>{RENDER_JS}</script>",
            "</body></html>",
        ]
    )
