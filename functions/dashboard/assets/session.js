// The signed-in state: the API key, in sessionStorage only (this tab, until it closes or
// "Sign out"), and what the sign-in page needs to know (why it is shown, where to go next).

const KEY_STORE = 'cairn.apiKey';

/** Why the next sign-in page is shown (set when a 401 ends the session), and where to go
 * after signing in (the page a signed-out visitor asked for). */
export const signin = { message: null, returnTo: null };

let memoryKey = null; // used only when sessionStorage is unavailable

export function getKey() {
  try {
    return window.sessionStorage.getItem(KEY_STORE);
  } catch {
    return memoryKey;
  }
}

export function setKey(key) {
  try {
    window.sessionStorage.setItem(KEY_STORE, key);
  } catch {
    memoryKey = key;
  }
}

export function clearKey() {
  memoryKey = null;
  try {
    window.sessionStorage.removeItem(KEY_STORE);
  } catch {
    // nothing stored
  }
}
