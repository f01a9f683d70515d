// The report's inline style and script (no external fonts, scripts or requests: the page must open
// with no network and the Content-Security-Policy forbids fetching anything).

// Sections skip their layout while off screen (content-visibility:auto): in the report of a full run
// (2.5 MB, some 72000 elements, two tables of ~1300 rows) layout was most of the renderer's work before
// the first screen showed, 0.9 to 1.7 s of main-thread time on the 2-core machine; with it the whole page
// cost 0.3 to 1.0 s. Find in page still searches them; print lays every section out.
export const CSS = `
:root{--fg:#1f2328;--mut:#656d76;--line:#d0d7de;--bg:#f6f8fa;--pass:#1a7f37;--fail:#cf222e;--err:#bc4c00;--skip:#8c959f;--blue:#0969da}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI","Helvetica Neue",Arial,sans-serif;color:var(--fg);background:#fff}
code,pre,.digest{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12.5px}
nav{position:sticky;top:0;z-index:5;background:#24292f;padding:0 24px;display:flex;gap:4px}
nav a{color:#e6edf3;text-decoration:none;padding:10px 12px;font-size:13px}
nav a:hover{background:#32383f}
main{max-width:1240px;margin:0 auto;padding:24px}
h1{font-size:26px;margin:4px 0 14px}
h2{font-size:19px;margin:0 0 12px;padding-bottom:6px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:18px 0 8px}
h4{font-size:13px;margin:14px 0 6px;color:var(--mut);text-transform:uppercase;letter-spacing:.04em}
section{margin:0 0 34px;content-visibility:auto;contain-intrinsic-size:auto 1200px}
.muted{color:var(--mut)} .small{font-size:12px} .big{font-size:26px;margin:6px 0}
.count{display:inline-block;font-size:12px;font-weight:600;background:var(--bg);border:1px solid var(--line);border-radius:10px;padding:1px 8px;vertical-align:middle;color:var(--mut)}
.head{display:grid;grid-template-columns:1fr 340px;gap:24px;margin-bottom:22px}
.eyebrow{font-size:12px;text-transform:uppercase;letter-spacing:.08em;color:var(--mut)}
.kv{display:grid;grid-template-columns:110px 1fr;gap:4px 12px;margin:0}
.kv dt{color:var(--mut)} .kv dd{margin:0;word-break:break-all}
.verdict{border-radius:8px;padding:16px 18px;color:#fff}
.verdict p{margin:6px 0 0;font-size:13px} .verdict ul{margin:8px 0 0;padding-left:18px;font-size:13px}
.verdict-label{font-size:12px;text-transform:uppercase;letter-spacing:.1em;opacity:.85}
.verdict-word{font-size:44px;font-weight:800;letter-spacing:.04em;line-height:1.1}
.headline{font-size:24px;line-height:1.25;margin:4px 0 2px} .sub{margin:0 0 10px;font-size:14px}
.cov-word{font-size:20px;font-weight:800;letter-spacing:.04em}
.coverage-line{margin-top:12px;padding-top:10px;border-top:1px solid rgba(255,255,255,.45)}
.cov-words{font-size:14px;margin:2px 0 6px}
.bar{height:8px;border-radius:4px;background:rgba(255,255,255,.35);overflow:hidden}.bar i{display:block;height:100%;background:#fff}
.v-pass{background:var(--pass)} .v-fail{background:var(--fail)} .v-error{background:var(--err)}
.sign{border:1px solid var(--line);border-radius:8px;padding:14px 18px;background:#fff}
.sign h2{border:0;margin:0 0 2px;padding:0;font-size:16px} .sign p{margin:0 0 10px;font-size:13px}
.sign-grid{display:grid;grid-template-columns:2fr 1fr 2fr;gap:16px 28px}
.sign-grid div{display:flex;flex-direction:column}
.sign-grid span{font-size:11px;text-transform:uppercase;letter-spacing:.06em;color:var(--mut)}
.sign-grid i{display:block;height:30px;border-bottom:1px solid #8c959f}
.sign-grid b{font-weight:normal;padding-top:8px}
.sign-grid .wide{grid-column:2/4}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:28px}
.cols>*,.head>*{min-width:0} .grid td{overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%}
.kvt th{text-align:left;font-weight:500;color:var(--mut);width:190px;padding:5px 10px 5px 0;vertical-align:top;border-bottom:1px solid #eaeef2}
.kvt td{padding:5px 0;border-bottom:1px solid #eaeef2;word-break:break-all}
.grid th,.grid td{border-bottom:1px solid #eaeef2;padding:5px 8px;text-align:left;vertical-align:top}
.grid thead th{background:var(--bg);border-bottom:1px solid var(--line);font-size:12px;color:var(--mut);font-weight:600;position:sticky;top:38px}
.grid.num td{font-variant-numeric:tabular-nums}
.grid td.r{text-align:right;white-space:nowrap}
.tiles{display:grid;grid-template-columns:repeat(7,1fr);gap:12px;margin-bottom:16px}
.tile{border:1px solid var(--line);border-radius:8px;padding:10px 14px;border-top-width:4px}
.tile .n{font-size:28px;font-weight:700;font-variant-numeric:tabular-nums}
.tile .l{font-size:12px;color:var(--mut);text-transform:uppercase;letter-spacing:.04em}
.tile .s{font-size:12px;color:var(--mut)}
.t-pass{border-top-color:var(--pass)} .t-fail{border-top-color:var(--fail)} .t-fail .n{color:var(--fail)} .t-error{border-top-color:var(--err)} .t-error .n{color:var(--err)}
.t-skip{border-top-color:var(--skip)} .t-warn{border-top-color:#d4a72c} .t-zero{border-top-color:var(--line)} .t-info{border-top-color:#0969da} .t-info .n{color:#0969da}
.chart text{font-size:12px;fill:#1f2328} .chart text.v{font-weight:600}
.plot{max-width:100%;height:auto;background:var(--bg);border-radius:6px} .plot text{font-size:11px;fill:#57606a} .plot text.pt{font-weight:600;fill:#1f2328}
.plots{display:grid;gap:8px;margin:8px 0} .first-m{margin-top:12px} .first-m h3{margin:6px 0} .kvt.mt th{width:200px} .kvt td.r{text-align:right;padding-right:10px;white-space:nowrap}
tr.m-fail td,tr.m-fail th{background:#ffebe9} .mtable{margin:8px 0} pre.tx{margin:0;max-height:140px;overflow:auto;font-size:11.5px} .tx-table td{font-size:12px}
details.motion-test{border-bottom:1px solid #eaeef2;padding:4px 0}
.sbar{vertical-align:middle;border-radius:2px}
.badge{display:inline-block;min-width:46px;text-align:center;font-size:11px;font-weight:700;border-radius:4px;padding:1px 6px;color:#fff;letter-spacing:.03em}
.b-passed{background:var(--pass)} .b-failed{background:var(--fail)} .b-errored{background:var(--err)} .b-skipped{background:var(--skip)}
.tag{font-size:11px;border-radius:4px;padding:0 5px;margin-left:4px;border:1px solid}
.tag.xf{color:#8c2f39;border-color:#e8a0a6} .tag.up{color:#116329;border-color:#4ac26b}
.c-fail{color:var(--fail);font-weight:600} .c-error{color:var(--err);font-weight:600}
.card{border:1px solid var(--line);border-left:4px solid var(--skip);border-radius:6px;padding:12px 16px;margin:0 0 14px;background:#fff}
.card.s-failed{border-left-color:var(--fail)} .card.s-errored{border-left-color:var(--err)} .card.s-passed{border-left-color:var(--pass)}
.card-head{display:flex;gap:10px;align-items:flex-start} .card-head .badge{margin-top:2px}
.card-title{font-weight:600;font-size:15px}
.covers{margin:8px 0;font-size:12px;color:var(--mut)}
.chip{background:#ddf4ff;color:#0550ae;border-radius:10px;padding:1px 7px;font-size:11.5px}
pre{white-space:pre-wrap;word-break:break-word;margin:8px 0}
pre.msg{background:#ffebe9;border:1px solid #ffcecb;border-radius:6px;padding:8px 10px;color:#82071e}
pre.trace,pre.json,pre.att-text{background:var(--bg);border:1px solid #eaeef2;border-radius:6px;padding:8px 10px;max-height:360px;overflow:auto}
.xfail{background:#fff8c5;border:1px solid #eac54f;border-radius:6px;padding:6px 10px;margin:8px 0;font-size:13px}
details{margin:8px 0} summary{cursor:pointer;color:var(--blue);font-size:13px}
ol.steps{margin:6px 0;padding-left:22px;font-size:13px} ol.steps ol{padding-left:20px}
.st{font-size:10.5px;font-weight:700;text-transform:uppercase;border-radius:3px;padding:0 4px;color:#fff;background:var(--skip)}
.st-passed{background:var(--pass)} .st-failed{background:var(--fail)} .st-broken{background:var(--err)}
.step-msg{color:#82071e;font-size:12px;white-space:pre-wrap}
.atts{display:grid;gap:10px;margin-top:8px}
.att{border:1px solid #eaeef2;border-radius:6px;padding:8px 10px}
.att img{max-width:100%;border:1px solid #eaeef2;margin-top:6px}
.att-head{font-size:13px}
.ok-note{background:#dafbe1;border:1px solid #aceebb;border-radius:6px;padding:8px 12px;color:#116329}
.bad-note{background:#ffebe9;border:1px solid #ffcecb;border-radius:6px;padding:8px 12px;color:#82071e}
ul.problems li{color:#82071e;margin:2px 0}
ul.plain{padding-left:18px}
.notes{background:#fff8c5;border:1px solid #eac54f;border-radius:8px;padding:12px 16px}
.notes h2{border:0;padding:0;margin:0 0 4px;font-size:16px} .notes ul{margin:6px 0 0;padding-left:18px;font-size:13px}
.legend .lg{margin-right:14px;white-space:nowrap} .legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.filter{display:flex;gap:10px;align-items:center;margin:10px 0}
.filter input{flex:0 1 380px;padding:6px 10px;border:1px solid var(--line);border-radius:6px;font:inherit}
.filter select{padding:5px 8px;border:1px solid var(--line);border-radius:6px;font:inherit;background:#fff}
.matrix tr.g th{background:#24292f;color:#fff;font-size:13px;padding:7px 8px;position:static}
.matrix tr.g th .muted{color:#afb8c1;font-weight:normal;margin-left:8px}
.matrix tr.sg th{background:var(--bg);font-weight:600;font-size:12px;color:#424a53;padding:4px 8px}
.matrix td:first-child{width:26%;word-break:break-all} .matrix td:nth-child(2){width:24%} .matrix td:nth-child(3),.matrix td:nth-child(4){width:80px;white-space:nowrap}
.matrix td{padding:3px 8px}
.cs,.oc,.cap{font-size:11px;border-radius:10px;padding:1px 8px;font-weight:600}
.cs-covered{background:#dafbe1;color:#116329} .cs-pending{background:#eaeef2;color:#57606a}
.oc-passed{color:var(--pass)} .oc-failed{color:#fff;background:var(--fail)} .oc-skipped{color:#7d4e00;background:#fff8c5} .oc-not_run{color:#57606a;background:#eaeef2} .oc-informative{color:#57606a;background:#ddf4ff}
.cap-implemented{background:#dafbe1;color:#116329} .cap-interim{background:#fff8c5;color:#7d4e00} .cap-test_only{background:#ddf4ff;color:#0550ae} .cap-unimplemented{background:#eaeef2;color:#57606a}
.reason{color:#57606a;font-style:italic}
.tests td:nth-child(2){max-width:420px}
footer{margin-top:40px;padding-top:12px;border-top:1px solid var(--line);color:var(--mut);font-size:12px}
@media (max-width:900px){.head,.cols{grid-template-columns:1fr}.tiles{grid-template-columns:repeat(4,1fr)}}
.badge{white-space:nowrap} td.hx{text-align:center;font-weight:700} .hx-passed{color:var(--pass)} .hx-failed,.hx-errored{color:#fff;background:var(--fail)} .hx-skipped,.hx-absent{color:#57606a} .tag.flaky{background:#fff8c5;color:#7d4e00;border:1px solid #d4a72c} .print-only{display:none} .tag.rep{background:#eaeef2;color:#24292f} tr.rep td{background:#f6f8fa}
/* Print: what a reviewer signs (verdict, environment, summary, run measurements, failures with the requests
   around them, family coverage, gate) fits a few pages; the long tables stay in the HTML file, said so in print. */
@media print{.print-only{display:block}#matrix-table,#tests-table,#measure-table,details.motion-test,details.tx-earlier,details.describe-json,#evidence{display:none!important}nav,.noprint{display:none}main{max-width:none;padding:0}.grid thead th{position:static}section{break-inside:auto;content-visibility:visible}.card,.sign,tr{break-inside:avoid}body{font-size:11px}pre{max-height:none!important}}
`;

// Filter boxes for the matrix and the tests table; opens the <details> a paper copy needs before printing
// (not the folded early requests of a transcript, the passing tests' motion or Describe's raw JSON, which
// the print stylesheet leaves to the HTML file).
export const JS = `
(function(){
  var inputs=document.querySelectorAll('input[data-filter]');
  Array.prototype.forEach.call(inputs,function(inp){
    var id=inp.getAttribute('data-filter'),table=document.getElementById(id);
    if(!table)return;
    var sel=document.querySelector('select[data-filter-state="'+id+'"]');
    var counter=document.querySelector('[data-filter-count="'+id+'"]');
    var rows=Array.prototype.slice.call(table.tBodies[0].rows);
    var text=rows.map(function(r){return r.textContent.toLowerCase();});
    function apply(){
      var q=inp.value.trim().toLowerCase(),s=sel?sel.value:'',shown=0,total=0,heads=[];
      rows.forEach(function(r,i){
        if(r.className==='g'||r.className==='sg'){
          if(r.className==='g')heads=[];
          heads=heads.filter(function(h){return h.className!==r.className;});
          heads.push(r);r.hidden=true;return;
        }
        total++;
        var st=' '+(r.getAttribute('data-s')||'')+' ';
        var ok=(!q||text[i].indexOf(q)>=0)&&(!s||st.indexOf(' '+s+' ')>=0);
        r.hidden=!ok;
        if(ok){shown++;heads.forEach(function(h){h.hidden=false;});}
      });
      if(counter)counter.textContent=(q||s)?shown+' of '+total+' shown':total+' rows';
    }
    inp.addEventListener('input',apply);
    if(sel)sel.addEventListener('change',apply);
    apply();
  });
  window.addEventListener('beforeprint',function(){
    Array.prototype.forEach.call(document.querySelectorAll('details:not(.tx-earlier):not(.motion-test):not(.describe-json)'),function(d){d.open=true;});
  });
})();
`;
