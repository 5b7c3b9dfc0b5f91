/* The language switch (book/_ext/minitfm_i18n.py) keeps the reader's place: both editions give every
   section the same anchor, so the current #fragment is added to the link when it is followed.
   Without JavaScript the link still opens the same page in the other language, at its top. */
document.addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest("a.minitfm-lang-switch");
  if (link && window.location.hash && !link.hash) link.hash = window.location.hash;
}, true);
