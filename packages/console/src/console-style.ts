/** The console's one stylesheet, served from its own path (the CSP allows no inline style). */
export const CONSOLE_CSS = `
:root { color-scheme: light; font-family: system-ui, sans-serif; }
body { margin: 0; color: #1a1a1a; background: #fff; }
header { background: #1f3a5f; color: #fff; padding: .5rem 1rem; display: flex; gap: 1.5rem; align-items: center; }
header a { color: #fff; }
header strong { margin-right: auto; }
main { padding: 1rem; max-width: 80rem; }
a { color: #0b4f9c; }
a:focus, button:focus, input:focus, select:focus, textarea:focus { outline: 3px solid #c05600; outline-offset: 2px; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; }
th, td { text-align: left; border-bottom: 1px solid #ccc; padding: .3rem .5rem; vertical-align: top; }
th { background: #eef2f7; }
td.num { text-align: right; }
pre { background: #f4f4f4; padding: .5rem; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
form.filters { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: end; margin-bottom: 1rem; }
form.filters label { display: flex; flex-direction: column; font-size: .9rem; }
button { background: #1f3a5f; color: #fff; border: 0; padding: .4rem .9rem; border-radius: 3px; cursor: pointer; }
button.danger { background: #a11; }
.note { background: #fff6d6; border-left: 4px solid #c9a100; padding: .5rem; }
.ok { background: #e5f5e5; border-left: 4px solid #2d7a2d; padding: .5rem; }
.readonly { background: #eef2f7; padding: .5rem; }
textarea { width: 100%; min-height: 12rem; font-family: monospace; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dt { font-weight: bold; }
`
