// Card payments: Stripe.js, loaded on demand from the address config.json names, and the
// card form of a top-up.

import { h, setBusy } from './dom.js';

let stripeLoading = null;

/** Loads Stripe.js once, from the address config.json names (the page's CSP admits that
 * origin only when card payments are configured). */
function loadStripe(url) {
  if (typeof window.Stripe === 'function') return Promise.resolve(window.Stripe);
  if (!stripeLoading) {
    stripeLoading = new Promise((resolve, reject) => {
      const script = document.createElement('script');
      script.src = url;
      script.addEventListener('load', () => (typeof window.Stripe === 'function'
        ? resolve(window.Stripe)
        : reject(new Error('Stripe.js loaded but did not start.'))));
      script.addEventListener('error', () => {
        stripeLoading = null;
        script.remove();
        reject(new Error('Stripe.js could not be loaded, so the card cannot be entered here. Check the connection and try again.'));
      });
      document.head.append(script);
    });
  }
  return stripeLoading;
}

/** The card form of a top-up: Stripe.js's card Element and a Pay button; on success it
 * says so and calls `paid`. Errors are Stripe's own messages (a declined card, an
 * incomplete number), shown beside the form, which stays usable. */
export async function cardForm(config, clientSecret, amount, paid) {
  const StripeJs = await loadStripe(config.stripe_js_url);
  const stripe = StripeJs(config.stripe_publishable_key);
  const card = stripe.elements().create('card');
  const mountPoint = h('div', { class: 'card-element', id: 'card-element', testid: 'card-element' });
  const cardError = h('p', { class: 'field-error', testid: 'card-error', role: 'alert', hidden: true });
  const pay = h('button', { type: 'submit', class: 'button button-primary', testid: 'card-pay' }, `Pay ${amount}`);
  const form = h('form', { class: 'form card-form', novalidate: true, 'aria-label': 'Card payment' },
    h('p', { class: 'field-label' }, 'Card'), mountPoint, cardError, h('div', { class: 'actions' }, pay));
  card.mount(mountPoint);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    cardError.hidden = true;
    const done = setBusy(pay, 'Paying…');
    let outcome;
    try {
      outcome = await stripe.confirmCardPayment(clientSecret, { payment_method: { card } });
    } catch (error) {
      outcome = { error: { message: error?.message || 'The payment could not be sent to Stripe.' } };
    }
    if (outcome?.error || outcome?.paymentIntent?.status !== 'succeeded') {
      cardError.textContent = outcome?.error?.message || 'The payment did not go through.';
      cardError.hidden = false;
      done();
      return;
    }
    card.destroy?.();
    form.replaceWith(h('p', { class: 'notice', testid: 'card-paid', role: 'status' },
      h('strong', {}, `Paid ${amount}.`), ' The credits are added as soon as Stripe confirms the payment (usually within seconds).'));
    paid();
  });
  return form;
}
