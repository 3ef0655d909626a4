// The book's widgets on a static page (the built book, a standalone test page): renders each
// saved widget view of the page with its widget's own ES module, and nothing else.
//
// A page with widgets carries their saved state (<script type="application/vnd.jupyter.widget-
// state+json">, written by myst-nb or ipywidgets.embed) and one <script type="application/vnd.
// jupyter.widget-view+json"> where each view goes. Every widget of the book is an anywidget
// (encdec/widgets/_base.py): its state holds its ES module (`_esm`) and its CSS (`_css`), and its
// module needs only get / set / on / off / save_changes from a model. In the built book a state
// names its widget instead, whose module the site serves once (moduleText). So this file stands in for
// the Jupyter widgets HTML manager (3.6 MB with RequireJS and its fonts) in a few kB: one model
// per saved state, local to the page (a change is never sent anywhere: there is no kernel), and
// one import of each module from a blob URL, which works from file:// too.
// A classic script: Sphinx puts it in <head>, so it waits for the document before it looks.
(function () {
  "use strict";
  const STATE = 'script[type="application/vnd.jupyter.widget-state+json"]';
  const VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]';

  // A model over one widget's saved traits: Backbone's get/set/on/off as anywidget's modules use them.
  function localModel(traits) {
    const listeners = new Map();
    const emit = (event, value) => (listeners.get(event) || []).slice().forEach((cb) => cb(value));
    return {
      get: (name) => traits[name],
      set(name, value) {
        if (traits[name] === value) return;
        traits[name] = value;
        emit(`change:${name}`, value);
        emit("change");
      },
      on(events, cb) {
        for (const event of events.split(/\s+/)) listeners.set(event, [...(listeners.get(event) || []), cb]);
      },
      off(events, cb) {
        for (const event of (events || "").split(/\s+/)) {
          listeners.set(event, (listeners.get(event) || []).filter((x) => cb && x !== cb));
        }
      },
      save_changes() {},  // no kernel on a static page: the change stays in the page
      send() {},
    };
  }

  const modules = new Map();  // one import per distinct module text
  function importModule(esm) {
    if (!modules.has(esm)) {
      const url = URL.createObjectURL(new Blob([esm], { type: "text/javascript" }));
      modules.set(esm, import(url).finally(() => URL.revokeObjectURL(url)));
    }
    return modules.get(esm);
  }

  // A widget's module in the built book: "encdec-esm:" and the widget's name (encdec.widgets._base.
  // SITE_ESM_NAME), looked up in the map of the registered widgets' module scripts, which the build
  // writes in here (encdec.widgets._base.renderer_js): a name not in it loads nothing. Each script is a
  // classic one (it loads from file:// too) that adds its bundle's text to self.ENCDEC_ESM under its path.
  const NAMED = "encdec-esm:";
  const MODULES = {};
  const scripts = new Map();
  function loadScript(path) {
    if (!scripts.has(path)) {
      scripts.set(path, new Promise((resolve, reject) => {
        const root = document.documentElement.dataset.content_root || "";
        const script = Object.assign(document.createElement("script"), { src: root + path });
        script.onload = () => {
          const text = (self.ENCDEC_ESM || {})[path];
          if (typeof text === "string") resolve(text);
          else reject(new Error(`${path} did not define its module`));
        };
        script.onerror = () => reject(new Error(`could not load ${path}`));
        document.head.append(script);
      }));
    }
    return scripts.get(path);
  }
  async function moduleText(esm) {
    if (!esm.startsWith(NAMED)) return esm;
    const name = esm.slice(NAMED.length);
    if (!Object.prototype.hasOwnProperty.call(MODULES, name)) throw new Error(`not a widget of the site: ${name}`);
    return loadScript(MODULES[name]);
  }

  // A widget's CSS: its text, or in the built book the path of the site's one stylesheet, relative
  // to the site's root (encdec.widgets._base.SITE_CSS), linked once.
  const SITE_PATH = /^[\w./-]+\.css$/;
  // A promise of the stylesheet in place: a widget draws once its style applies.
  const styles = new Map();
  function addStyle(css) {
    if (!css) return Promise.resolve();
    if (!styles.has(css)) {
      if (SITE_PATH.test(css)) {
        const root = document.documentElement.dataset.content_root || "";
        const link = Object.assign(document.createElement("link"), { rel: "stylesheet", href: root + css });
        styles.set(css, new Promise((resolve) => { link.onload = link.onerror = resolve; }));
        document.head.append(link);
      } else {
        document.head.append(Object.assign(document.createElement("style"), { textContent: css }));
        styles.set(css, Promise.resolve());
      }
    }
    return styles.get(css);
  }

  // The widgets' string tables' "static_page.failed", by language: the build writes them in here
  // (encdec.widgets._base.renderer_js), since a widget that could not be drawn brings no table.
  const FAILED = {};

  function failed(el, error) {
    console.error("encdec: a widget did not render", error);
    const lang = (document.documentElement.lang || "").toLowerCase().startsWith("zh") ? "zh" : "en";
    el.textContent = (FAILED[lang] || FAILED.en || "{why}").replace("{why}", error && error.message ? error.message : error);
  }

  async function renderView(view, saved) {
    const el = document.createElement("div");
    el.className = "encdec-widget-view";
    view.after(el);  // the view's script stays, as the Jupyter widgets HTML manager leaves it
    try {
      const { model_id: id } = JSON.parse(view.textContent);
      const entry = saved[id];
      if (!entry || typeof entry.state._esm !== "string") {
        throw new Error(`no saved state of an anywidget with id ${id}`);
      }
      const traits = { ...entry.state };
      const [module] = await Promise.all([moduleText(traits._esm).then(importModule), addStyle(traits._css)]);
      const widget = module.default || module;
      const model = localModel(traits);
      if (typeof widget.initialize === "function") await widget.initialize({ model });
      await widget.render({ model, el });
    } catch (error) {
      failed(el, error);
    }
  }

  function renderAll() {
    const states = document.querySelectorAll(STATE);
    const saved = {};
    for (const script of states) Object.assign(saved, JSON.parse(script.textContent).state || {});
    return Promise.all([...document.querySelectorAll(VIEW)].map((view) => renderView(view, saved)));
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", renderAll);
  else renderAll();
})();
