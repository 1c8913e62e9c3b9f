// Loaded before /vendor/api.js. The api bundle (16.5.6) reads two @polkadot/types sub-modules
// from globals that no bundle defines (@polkadot/types/util and /extrinsic/constants): the
// same definitions, by hand. (A script file, not inline, so the page's CSP allows no inline
// script.)
'use strict';
window['util$1'] = { unwrapStorageSi: (t) => (t.isPlain ? t.asPlain : t.asMap.value) };
window.constants = { LATEST_EXTRINSIC_VERSION: 4 };
