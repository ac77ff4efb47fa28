/* The HTML report: one self-contained page a person opens in a browser. No request of any
 * kind leaves it: the script and the style are inline, and its Content-Security-Policy forbids
 * everything else (default-src 'none'). What it says without a script is plain HTML: the
 * heading, the status, every total and the ranked bottleneck table, as the profile has them
 * (the same order, numbers and unavailable values: the report's own lists, jp_wr_totals and
 * its entries). With the script: a flame graph of the export's stacks drawn on a canvas
 * (click to zoom, a reset, search by name with the matched share, a tooltip with a frame's
 * exact value, share, path and line; zoom and search kept in the URL's fragment; frames
 * narrower than a pixel merged, not drawn), in memory mode a selector of the value (the
 * values `--value` has, those the run has) and the memory over time from the run's timeline,
 * in CPU mode the samples a second over time by state.
 *
 * Everything that came from the profile is escaped for where it lands: HTML text and
 * attributes get entity references (control characters first made visible by the one rule
 * for human text, common/text.h); the data the script reads is one JSON document in a
 * <script type="application/json"> element with every '<', '>' and '&' written as \u003c,
 * \u003e, \u0026, so no name can end that element. The bytes depend on the profile only. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/text.h"
#include "export_internal.h"

/* HTML text or a quoted attribute value: s[n] made safe for a person (common/text.h), then
 * the five specials as references. */
void jpx_html_text(struct jp_buf *b, const char *s, size_t n)
{
    struct jp_buf tmp = {0};
    jp_text_safe(&tmp, s, n);
    for (size_t i = 0; i < tmp.len; i++) {
        char c = tmp.p[i];
        if (c == '&')
            JP_BUF_LIT(b, "&amp;");
        else if (c == '<')
            JP_BUF_LIT(b, "&lt;");
        else if (c == '>')
            JP_BUF_LIT(b, "&gt;");
        else if (c == '"')
            JP_BUF_LIT(b, "&quot;");
        else if (c == '\'')
            JP_BUF_LIT(b, "&#39;");
        else
            jp_buf_put(b, &c, 1);
    }
    b->failed |= tmp.failed;
    jp_buf_free(&tmp);
}

static void html_str(struct jp_buf *b, const char *s)
{
    jpx_html_text(b, s, strlen(s));
}

/* JSON text for a <script> data block: '<', '>' and '&' as \u escapes (they only ever stand
 * inside JSON strings, where the escape means the same character). */
static void script_json(struct jp_buf *b, const struct jp_buf *json)
{
    for (size_t i = 0; i < json->len; i++) {
        char c = json->p[i];
        if (c == '<')
            JP_BUF_LIT(b, "\\u003c");
        else if (c == '>')
            JP_BUF_LIT(b, "\\u003e");
        else if (c == '&')
            JP_BUF_LIT(b, "\\u0026");
        else
            jp_buf_put(b, &c, 1);
    }
    b->failed |= json->failed;
}

/* A JSON string of s[n] (which need not end in NUL). */
static void json_bytes(struct jp_buf *b, const char *s, size_t n)
{
    char *z = malloc(n + 1u);
    if (!z) {
        b->failed = 1;
        return;
    }
    memcpy(z, s, n);
    z[n] = 0;
    jp_json_str(b, z);
    free(z);
}

static void hundredths(struct jp_buf *b, uint64_t h)
{
    jp_buf_printf(b, "%" PRIu64 ".%02" PRIu64, h / 100u, h % 100u);
}

static void cell_u64(struct jp_buf *b, bool avail, uint64_t v)
{
    if (avail)
        jp_buf_printf(b, "<td class=\"n\">%" PRIu64 "</td>", v);
    else
        JP_BUF_LIT(b, "<td class=\"n u\">unavailable</td>");
}

/* The page's plain part: heading, status, totals, bottlenecks. */
static void plain_part(struct jp_buf *b, const struct jp_report *r, const char *title)
{
    const struct jp_engine_view *v = r->v;
    const bool cpu = v->mode == JP_MODE_CPU;
    JP_BUF_LIT(b, "<h1>");
    html_str(b, title);
    JP_BUF_LIT(b, "</h1>\n<p class=\"status\">status: <b>");
    html_str(b, jp_status_word(r->status) ? jp_status_word(r->status) : "unknown");
    JP_BUF_LIT(b, "</b>");
    if (r->reason && r->reason[0]) {
        JP_BUF_LIT(b, " (");
        html_str(b, r->reason);
        JP_BUF_LIT(b, ")");
    }
    JP_BUF_LIT(b, " &middot; termination: ");
    html_str(b, r->termination ? r->termination : "unavailable");
    JP_BUF_LIT(b, "</p>\n<details open><summary>totals</summary>\n<table class=\"totals\">\n");
    struct jp_wr_item items[JP_WR_MAX_ITEMS];
    unsigned n = jp_wr_totals(r, items);
    for (unsigned i = 0; i < n; i++) {
        JP_BUF_LIT(b, "<tr><th>");
        html_str(b, items[i].k);
        JP_BUF_LIT(b, "</th>");
        if (items[i].kind == JP_WR_HUNDREDTHS) {
            JP_BUF_LIT(b, "<td class=\"n\">");
            hundredths(b, items[i].v);
            JP_BUF_LIT(b, "</td>");
        } else {
            cell_u64(b, items[i].kind == JP_WR_U64, items[i].v);
        }
        JP_BUF_LIT(b, "</tr>\n");
    }
    JP_BUF_LIT(b, "</table></details>\n<h2>bottlenecks</h2>\n");
    if (!r->emitted) {
        JP_BUF_LIT(b, "<p>none at or above the threshold</p>\n");
        return;
    }
    JP_BUF_LIT(b, "<table class=\"bn\">\n<thead><tr><th>rank</th><th>function</th>"
                  "<th>path</th><th>line</th>");
    if (cpu)
        JP_BUF_LIT(b, "<th>inclusive_samples</th><th>self_samples</th><th>cpu_percent</th>");
    else
        JP_BUF_LIT(b, "<th>allocation_count</th><th>allocated_bytes</th>"
                      "<th>allocation_percent</th><th>freed_bytes</th><th>retained_bytes</th>"
                      "<th>live_at_peak_bytes</th><th>resize_count</th>");
    JP_BUF_LIT(b, "</tr></thead>\n<tbody>\n");
    struct jp_buf name = {0};
    for (uint32_t i = 0; i < r->emitted; i++) {
        const struct jp_entry *en = &r->entries[i];
        const struct jp_func *f = &v->funcs[en->func];
        const struct jp_source *src = f->source ? &v->sources[f->source] : NULL;
        name.len = 0;
        jp_buf_put(&name, "", 0);
        jp_report_func_name(&name, f);
        jp_buf_printf(b, "<tr><td class=\"n\">%" PRIu32 "</td><td>", i + 1u);
        jpx_html_text(b, name.p ? name.p : "", name.len);
        JP_BUF_LIT(b, "</td><td>");
        if (src)
            jpx_html_text(b, src->path, src->path_len);
        else
            JP_BUF_LIT(b, "<span class=\"u\">unavailable</span>");
        JP_BUF_LIT(b, "</td>");
        cell_u64(b, src != NULL, f->decl_line);
        uint64_t pct = jp_percent_hundredths(en->impact, r->denominator);
        if (cpu) {
            cell_u64(b, true, f->cpu.inclusive);
            cell_u64(b, true, f->cpu.self);
        } else {
            cell_u64(b, true, f->mem.count);
            cell_u64(b, true, f->mem.allocated);
        }
        JP_BUF_LIT(b, "<td class=\"n\">");
        hundredths(b, pct);
        JP_BUF_LIT(b, "</td>");
        if (!cpu) {
            bool live = r->live_exact;
            cell_u64(b, live, f->freed);
            cell_u64(b, live && !r->snapshot, f->live);
            cell_u64(b, live, jp_func_live_at_peak(f, v->peak_epoch));
            cell_u64(b, true, f->resize_count);
        }
        JP_BUF_LIT(b, "</tr>\n");
    }
    b->failed |= name.failed;
    jp_buf_free(&name);
    JP_BUF_LIT(b, "</tbody></table>\n");
}

/* One value's flame nodes as JSON: [[func, parent + 1, value], ...] in preorder. */
static int nodes_json(struct jp_buf *j, const struct jpx_prof *p)
{
    struct jpx_svg_node *nodes;
    uint32_t n;
    int rc = jpx_svg_tree(p, &nodes, &n);
    if (rc < 0)
        return rc;
    jp_buf_printf(j, "{\"total\":%" PRIu64 ",\"unit\":", p->total);
    jp_json_str(j, jpx_value_unit(p->value));
    JP_BUF_LIT(j, ",\"nodes\":[");
    for (uint32_t i = 0; i < n; i++)
        jp_buf_printf(j, "%s[%" PRIu32 ",%" PRIu32 ",%" PRIu64 "]", i ? "," : "", nodes[i].func,
                      nodes[i].parent, nodes[i].value);
    JP_BUF_LIT(j, "]}");
    free(nodes);
    return 0;
}

/* The data the script reads. */
static int page_json(struct jp_buf *j, const struct jpx_prof *p, const char *title,
                     const uint32_t *colour, uint32_t ncolour)
{
    const struct jp_engine_view *v = p->v;
    const bool cpu = v->mode == JP_MODE_CPU;
    JP_BUF_LIT(j, "{\"mode\":");
    jp_json_str(j, cpu ? "cpu" : "memory");
    JP_BUF_LIT(j, ",\"title\":");
    jp_json_str(j, title);
    /* every function: [name, path or null, line], and <unattributed> last */
    JP_BUF_LIT(j, ",\"frames\":[");
    struct jp_buf name = {0};
    for (uint32_t f = 0; f < v->nfuncs; f++) {
        const struct jp_func *fn = &v->funcs[f];
        name.len = 0;
        jp_buf_put(&name, "", 0);
        jp_report_func_name(&name, fn);
        jp_buf_puts(j, f ? ",[" : "[");
        json_bytes(j, name.p ? name.p : "", name.len);
        uint16_t plen = 0;
        const char *path = jpx_frame_path(v, fn, &plen);
        JP_BUF_LIT(j, ",");
        if (path)
            json_bytes(j, path, plen);
        else
            JP_BUF_LIT(j, "null");
        jp_buf_printf(j, ",%" PRIu32 "]", path ? fn->decl_line : 0u);
    }
    j->failed |= name.failed;
    jp_buf_free(&name);
    jp_buf_puts(j, v->nfuncs ? ",[" : "[");
    jp_json_str(j, JPX_FRAME_UNATTRIBUTED);
    JP_BUF_LIT(j, ",null,0]]");
    /* the values: the export's own first, then (memory) the others the run has */
    JP_BUF_LIT(j, ",\"values\":{");
    jp_json_str(j, jp_export_value_name(p->value));
    JP_BUF_LIT(j, ":");
    int rc = nodes_json(j, p);
    if (rc < 0)
        return rc;
    if (!cpu && !colour) {
        static const uint32_t more[] = {JP_XVAL_ALLOC_BYTES, JP_XVAL_ALLOC_COUNT,
                                        JP_XVAL_RETAINED_BYTES, JP_XVAL_PEAK_BYTES,
                                        JP_XVAL_RETAINED_COUNT, JP_XVAL_LIVE_BYTES};
        for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
            /* retained figures mean nothing before the end: a snapshot has live_bytes */
            if (more[i] == p->value ||
                (p->r->snapshot ? more[i] == JP_XVAL_RETAINED_BYTES ||
                                      more[i] == JP_XVAL_RETAINED_COUNT
                                : more[i] == JP_XVAL_LIVE_BYTES))
                continue;
            struct jpx_prof q;
            rc = jpx_prof_since(p->r, more[i], p->base, &q);
            if (rc == -ENODATA)
                continue;
            if (rc < 0)
                return rc;
            JP_BUF_LIT(j, ",");
            jp_json_str(j, jp_export_value_name(more[i]));
            JP_BUF_LIT(j, ":");
            rc = nodes_json(j, &q);
            jpx_prof_free(&q);
            if (rc < 0)
                return rc;
        }
    }
    JP_BUF_LIT(j, "}");
    if (colour) {
        JP_BUF_LIT(j, ",\"colour\":[");
        for (uint32_t i = 0; i < ncolour; i++)
            jp_buf_printf(j, "%s%" PRIu32, i ? "," : "", colour[i]);
        JP_BUF_LIT(j, "]");
    }
    /* the timeline: [live_max, allocated, count] (memory) or samples by state (CPU) */
    jp_buf_printf(j, ",\"stretch_ns\":%" PRIu64 ",\"states\":[\"jett\",\"runtime\","
                     "\"waiting\",\"unavailable\"],\"timeline\":[",
                  v->timeline_stretch_ns);
    _Static_assert(JP_STATE_LIMIT == 4, "the state names above");
    for (uint32_t i = 0; v->timeline && i < v->timeline_n; i++) {
        const struct jp_timeline_point *t = &v->timeline[i];
        if (cpu)
            jp_buf_printf(j, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]",
                          i ? "," : "", t->samples[0], t->samples[1], t->samples[2],
                          t->samples[3]);
        else
            jp_buf_printf(j, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", i ? "," : "",
                          t->live_max, t->allocated, t->count);
    }
    JP_BUF_LIT(j, "]}");
    return 0;
}

static const char page_style[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:18px 0 6px}"
    "table{border-collapse:collapse}td,th{padding:2px 8px;text-align:left;"
    "border-bottom:1px solid #eee}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".u{color:#888}.totals th{font-weight:normal;color:#555}"
    "#ctl{margin:10px 0;display:flex;gap:8px;align-items:center;flex-wrap:wrap}"
    "#flame,#chart{width:100%;display:block;border:1px solid #ddd}"
    "#tip{position:fixed;pointer-events:none;background:#fffbe6;border:1px solid #cc9;"
    "padding:4px 6px;font:12px monospace;display:none;max-width:60ch;white-space:pre-wrap}"
    "#match{color:#a50}";

/* The script: reads #data, draws the flame graph and the chart, keeps zoom and search in the
 * fragment (#zoom=N&q=TEXT). Text from the data reaches the page only as textContent. A run
 * shorter than one of the timeline's buckets has one point: the chart draws it as a level line
 * across (a path of one point strokes nothing). */
static const char *const page_script[] = {
    "(function(){'use strict';\n",
    "var D=JSON.parse(document.getElementById('data').textContent);\n",
    "var F=document.getElementById('flame'),C=F.getContext('2d'),T=document.getElementById('tip');\n",
    "var Q=document.getElementById('q'),M=document.getElementById('match');\n",
    "var sel=document.getElementById('value'),names=Object.keys(D.values);\n",
    "names.forEach(function(n){var o=document.createElement('option');o.value=n;",
    "o.textContent=n;sel.appendChild(o);});\n",
    "if(names.length<2)sel.style.display='none';\n",
    "var V,N,kids,zoom=0,query='',rows=[],ROW=16;\n",
    "function load(name){V=D.values[name];N=V.nodes;kids=[];for(var i=0;i<=N.length;i++)kids.push([]);\n",
    " for(var i=0;i<N.length;i++)kids[N[i][1]].push(i+1);}\n",
    "function frame(i){return D.frames[N[i-1][0]];}\n",
    "function val(i){return i?N[i-1][2]:V.total;}\n",
    "function depthOf(i){var d=0;while(i){d++;i=N[i-1][1];}return d;}\n",
    "function hit(i){return query&&frame(i)[0].toLowerCase().indexOf(query)>=0;}\n",
    "function matched(i){var s=0;kids[i].forEach(function(k){s+=hit(k)?val(k):matched(k);});return s;}\n",
    "function hue(s){var h=0;for(var i=0;i<s.length;i++)h=(h*31+s.charCodeAt(i))>>>0;return h;}\n",
    "function colour(i){if(D.colour){var c=D.colour[i-1];return '#'+('00000'+c.toString(16)).slice(-6);}\n",
    " var h=hue(frame(i)[0]);return 'hsl('+(10+h%40)+','+(60+h%30)+'%,'+(55+h%15)+'%)';}\n",
    "function fmt(n){return n.toLocaleString('en-US');}\n",
    "function draw(){var w=F.clientWidth;var depth=0;\n",
    " (function md(i,d){depth=Math.max(depth,d);kids[i].forEach(function(k){md(k,d+1);});})(zoom,0);\n",
    " var base=zoom?depthOf(zoom):0;F.width=w;F.height=(depth+1)*ROW;rows=[];\n",
    " C.font='12px monospace';C.textBaseline='middle';\n",
    " var tot=val(zoom)||1;\n",
    " function box(i,x,wd,d){if(wd<1)return;var y=F.height-(d+1)*ROW;\n",
    "  C.fillStyle=hit(i)?'#e040e0':colour(i);C.fillRect(x,y,wd-0.5,ROW-1);\n",
    "  rows.push([x,y,wd,i]);var t=frame(i)[0];if(wd>21){C.fillStyle='#000';\n",
    "   var n=Math.floor((wd-6)/7.2);C.fillText(t.length>n?t.slice(0,Math.max(n-2,0))+'..':t,x+3,y+ROW/2);}\n",
    "  var cx=x;kids[i].forEach(function(k){var kw=wd*val(k)/val(i);box(k,cx,kw,d+1);cx+=kw;});}\n",
    " if(zoom)box(zoom,0,w,0);else{var cx=0;kids[0].forEach(function(k){var kw=w*val(k)/tot;box(k,cx,kw,0);cx+=kw;});}\n",
    " M.textContent=query?'matched: '+(100*(zoom&&hit(zoom)?val(zoom):matched(zoom))/tot).toFixed(2)+'%':'';\n",
    "}\n",
    "function at(e){var r=F.getBoundingClientRect(),x=e.clientX-r.left,y=e.clientY-r.top;\n",
    " for(var i=0;i<rows.length;i++){var b=rows[i];if(x>=b[0]&&x<b[0]+b[2]&&y>=b[1]&&y<b[1]+ROW)return b[3];}return 0;}\n",
    "F.addEventListener('mousemove',function(e){var i=at(e);if(!i){T.style.display='none';return;}\n",
    " var f=frame(i);T.textContent=f[0]+'\\n'+fmt(val(i))+' '+V.unit+', '+(100*val(i)/(V.total||1)).toFixed(2)+'%'+\n",
    "  (f[1]?'\\n'+f[1]+':'+f[2]:'');T.style.display='block';T.style.left=(e.clientX+12)+'px';T.style.top=(e.clientY+12)+'px';});\n",
    "F.addEventListener('mouseleave',function(){T.style.display='none';});\n",
    "function save(){var h='zoom='+zoom+(query?'&q='+encodeURIComponent(query):'');\n",
    " if(location.hash.slice(1)!==h)history.replaceState(null,'','#'+h);}\n",
    "F.addEventListener('click',function(e){var i=at(e);zoom=i;save();draw();});\n",
    "document.getElementById('reset').addEventListener('click',function(){zoom=0;query='';Q.value='';save();draw();});\n",
    "Q.addEventListener('input',function(){query=Q.value.toLowerCase();save();draw();});\n",
    "sel.addEventListener('change',function(){load(sel.value);zoom=0;save();draw();});\n",
    "function restore(){var h=new URLSearchParams(location.hash.slice(1));var z=parseInt(h.get('zoom')||'0',10);\n",
    " zoom=z>0&&z<=N.length?z:0;query=(h.get('q')||'').toLowerCase();Q.value=h.get('q')||'';}\n",
    "load(names[0]);restore();draw();window.addEventListener('resize',draw);\n",
    "window.addEventListener('hashchange',function(){restore();draw();});\n",
    "var H=document.getElementById('chart'),P=D.timeline;\n",
    "if(!P.length){H.style.display='none';document.getElementById('charthead').style.display='none';}else{\n",
    " var X=H.getContext('2d');var sec=D.stretch_ns/1e9;\n",
    " function series(){if(D.mode==='memory')return [P.map(function(p){return p[0];}),P.map(function(p){return p[1]/sec;})];\n",
    "  return [0,1,2,3].map(function(s){return P.map(function(p){return p[s]/sec;});});}\n",
    " var S=series(),cols=D.mode==='memory'?['#c33','#39c']:['#c33','#39c','#aaa','#666'];\n",
    " var labels=D.mode==='memory'?['live bytes','bytes allocated a second']:D.states.map(function(s){return s+' samples a second';});\n",
    " function chart(){var w=H.clientWidth,h=160;H.width=w;H.height=h;X.clearRect(0,0,w,h);\n",
    "  S.forEach(function(s,k){var m=Math.max.apply(null,s)||1;X.strokeStyle=cols[k];X.beginPath();\n",
    "   s.forEach(function(v,i){var y=h-4-(h-8)*v/m;if(P.length<2){X.moveTo(0,y);X.lineTo(w-1,y);return;}\n",
    "    var x=i*(w-1)/(P.length-1);i?X.lineTo(x,y):X.moveTo(x,y);});X.stroke();});}\n",
    " chart();window.addEventListener('resize',chart);\n",
    " H.addEventListener('mousemove',function(e){var r=H.getBoundingClientRect();var i=Math.round((e.clientX-r.left)/(r.width||1)*(P.length-1));\n",
    "  if(i<0||i>=P.length)return;var t=(i*sec).toFixed(2)+' s - '+((i+1)*sec).toFixed(2)+' s';\n",
    "  S.forEach(function(s,k){t+='\\n'+labels[k]+': '+fmt(Math.round(s[i]));});\n",
    "  T.textContent=t;T.style.display='block';T.style.left=(e.clientX+12)+'px';T.style.top=(e.clientY+12)+'px';});\n",
    " H.addEventListener('mouseleave',function(){T.style.display='none';});}\n",
    "})();\n",
    NULL};

/* The whole page: title, the plain part, the flame graph's controls and canvas, the chart, the
 * data and the script. colour: per flame node of the export's value, 0xRRGGBB (a diff), or
 * NULL for the plain colours; extra: HTML after the bottlenecks (a diff's changes), or NULL. */
static void page(struct jp_buf *b, const struct jpx_prof *p, const char *title,
                 const uint32_t *colour, uint32_t ncolour, const char *extra)
{
    const bool cpu = p->v->mode == JP_MODE_CPU;
    JP_BUF_LIT(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                  "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                  "script-src 'unsafe-inline'; style-src 'unsafe-inline'; base-uri 'none'; "
                  "form-action 'none'\">\n<title>");
    html_str(b, title);
    JP_BUF_LIT(b, "</title>\n<style>");
    jp_buf_puts(b, page_style);
    JP_BUF_LIT(b, "</style></head><body>\n");
    plain_part(b, p->r, title);
    if (extra)
        jp_buf_puts(b, extra);
    JP_BUF_LIT(b, "<h2>flame graph</h2>\n<noscript><p>The flame graph and the chart need "
                  "JavaScript; the tables above are the whole profile.</p></noscript>\n"
                  "<div id=\"ctl\"><select id=\"value\" aria-label=\"value\"></select>"
                  "<input id=\"q\" type=\"search\" placeholder=\"search functions\" "
                  "aria-label=\"search\"><button id=\"reset\" type=\"button\">reset zoom"
                  "</button><span id=\"match\"></span></div>\n<canvas id=\"flame\"></canvas>\n"
                  "<h2 id=\"charthead\">");
    jp_buf_puts(b, cpu ? "samples a second over time, by state"
                       : "memory over time: live bytes and bytes allocated a second");
    JP_BUF_LIT(b, "</h2>\n<canvas id=\"chart\"></canvas>\n<div id=\"tip\"></div>\n"
                  "<script type=\"application/json\" id=\"data\">");
    struct jp_buf json = {0};
    int rc = page_json(&json, p, title, colour, ncolour);
    if (rc < 0)
        b->failed = 1;
    else
        script_json(b, &json);
    jp_buf_free(&json);
    JP_BUF_LIT(b, "</script>\n<script>");
    for (const char *const *line = page_script; *line; line++)
        jp_buf_puts(b, *line);
    JP_BUF_LIT(b, "</script>\n</body></html>\n");
}

void jpx_write_html(struct jp_buf *b, const struct jpx_prof *p)
{
    struct jp_buf title = {0};
    jpx_prof_title(&title, p);
    page(b, p, title.p ? title.p : "", NULL, 0, NULL);
    b->failed |= title.failed;
    jp_buf_free(&title);
}

void jpx_write_html_diff(struct jp_buf *b, const struct jpx_prof *p, const char *title,
                         const uint32_t *colour, uint32_t ncolour, const char *changes)
{
    page(b, p, title, colour, ncolour, changes);
}
