// Exchanges MLS artifacts of cipher suite 0x004D
// (MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519) between ts-mls and the
// Go engine in package mls. See README.md for the order of the steps.
//
//	node interop.mjs produce   ts-mls side of flow A, and a KeyPackage for flow B
//	node interop.mjs consume   ts-mls consumes the Go side of flow B
//
// Every artifact is written as hex in JSON under ../../../testdata/xwing-tsmls/.

import { readFileSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { fileURLToPath, pathToFileURL } from "node:url";
import { dirname, join } from "node:path";
import {
  createApplicationMessage,
  createCommit,
  createGroup,
  decode,
  defaultCapabilities,
  defaultCredentialTypes,
  defaultProposalTypes,
  encode,
  generateKeyPackage,
  getCiphersuiteImpl,
  joinGroup,
  mlsExporter,
  mlsMessageDecoder,
  mlsMessageEncoder,
  privateKeyPackageDecoder,
  privateKeyPackageEncoder,
  processMessage,
  protocolVersions,
  unsafeTestingAuthenticationService,
  wireformats,
} from "ts-mls";

const here = dirname(fileURLToPath(import.meta.url));
const outDir = join(here, "..", "..", "..", "testdata", "xwing-tsmls");
const XWING_SUITE = 0x004d;

const hex = (b) => Buffer.from(b).toString("hex");
const unhex = (s) => new Uint8Array(Buffer.from(s, "hex"));
const sha256 = (b) => createHash("sha256").update(b).digest("hex");
const readJSON = (name) => JSON.parse(readFileSync(join(outDir, name), "utf8"));
const writeJSON = (name, v) => writeFileSync(join(outDir, name), JSON.stringify(v, null, 2) + "\n");
const version = (pkg) =>
  JSON.parse(readFileSync(join(here, "node_modules", ...pkg.split("/"), "package.json"), "utf8")).version;

// ts-mls 2.0.0-rc.10 has no suite 0x004D of its own: its X-Wing suites
// (0xf00d, 0xf00e) use SHA-512. Its CiphersuiteImpl is an open record with
// a numeric id, so the suite is composed here from ts-mls's own building
// blocks: hash, KDF, Ed25519 and RNG of its suite 3 (SHA-256, HKDF-SHA256,
// Ed25519), and an HPKE built by ts-mls's makeHpke with X-Wing (hpke-js
// @hpke/hybridkem-x-wing), HKDF-SHA256 and ChaCha20-Poly1305. makeHpke is
// not exported from the package, so it is loaded from its file.
async function xwingSuite() {
  const base = await getCiphersuiteImpl("MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519");
  const makeHpkeURL = pathToFileURL(
    join(here, "node_modules", "ts-mls", "dist", "src", "crypto", "implementation", "default", "makeHpke.js"),
  );
  const { makeHpke } = await import(makeHpkeURL.href);
  const hpke = await makeHpke({ kem: "X-Wing", kdf: "HKDF-SHA256", aead: "CHACHA20POLY1305" });
  return { ...base, hpke, id: XWING_SUITE };
}

function capabilities() {
  const c = defaultCapabilities();
  return { ...c, ciphersuites: [...c.ciphersuites, XWING_SUITE] };
}

async function keyPackage(impl, identity) {
  return generateKeyPackage({
    credential: { credentialType: defaultCredentialTypes.basic, identity: new TextEncoder().encode(identity) },
    capabilities: capabilities(),
    cipherSuite: impl,
  });
}

const kpMessage = (kp) =>
  encode(mlsMessageEncoder, { keyPackage: kp, wireformat: wireformats.mls_key_package, version: protocolVersions.mls10 });

function decodeMessage(bytes, wireformat) {
  const m = decode(mlsMessageDecoder, bytes);
  if (!m || m.wireformat !== wireformat) throw new Error(`expected wireformat ${wireformat}`);
  return m;
}

async function exporter(state, impl) {
  return hex(await mlsExporter(state.keySchedule.exporterSecret, "skytale interop", new Uint8Array([1, 2, 3]), 32, impl));
}

function summary(state) {
  return {
    epoch: Number(state.groupContext.epoch),
    epoch_authenticator: hex(state.keySchedule.epochAuthenticator),
    members: state.ratchetTree.filter((n, i) => i % 2 === 0 && n !== undefined).length,
  };
}

function versions() {
  return {
    node: process.version,
    "ts-mls": version("ts-mls"),
    "@hpke/core": version("@hpke/core"),
    "@hpke/hybridkem-x-wing": version("@hpke/hybridkem-x-wing"),
    "@hpke/chacha20poly1305": version("@hpke/chacha20poly1305"),
  };
}

// produce: flow A (ts-mls creates a group, adds the Go KeyPackage, commits
// with a path, sends a message) and a KeyPackage of ts-mls for flow B.
async function produce() {
  const impl = await xwingSuite();
  const context = { cipherSuite: impl, authService: unsafeTestingAuthenticationService };

  // DeriveKeyPair of the KEM on fixed secrets: the Go side must derive the
  // same public keys from them.
  const derive = [];
  for (const fill of [0x00, 0x42, 0xff]) {
    const ikm = new Uint8Array(32).fill(fill);
    const { publicKey } = await impl.hpke.deriveKeyPair(ikm);
    derive.push({ ikm: hex(ikm), public_key: hex(await impl.hpke.exportPublicKey(publicKey)) });
  }

  const goKP = decodeMessage(unhex(readJSON("go-keypackage.json").key_package), wireformats.mls_key_package);

  const alice = await keyPackage(impl, "did:key:ts-alice");
  let aliceState = await createGroup({
    context,
    groupId: new TextEncoder().encode("ts-mls x-wing interop"),
    keyPackage: alice.publicPackage,
    privateKeyPackage: alice.privatePackage,
  });

  // Commit 1: add the Go member (with a path); Welcome carries no tree,
  // which goes separately.
  const add = await createCommit({
    context,
    state: aliceState,
    extraProposals: [{ proposalType: defaultProposalTypes.add, add: { keyPackage: goKP.keyPackage } }],
    ratchetTreeExtension: false,
  });
  aliceState = add.newState;
  const welcome = encode(mlsMessageEncoder, add.welcome);
  const { ratchetTreeEncoder } = await import(
    pathToFileURL(join(here, "node_modules", "ts-mls", "dist", "src", "ratchetTree.js")).href
  );
  const tree = encode(ratchetTreeEncoder, aliceState.ratchetTree);
  const afterAdd = summary(aliceState);

  // Commit 2: an empty Commit, which carries a path: the Go member
  // decrypts a path secret encrypted to its X-Wing leaf key.
  const upd = await createCommit({ context, state: aliceState, wireAsPublicMessage: false });
  aliceState = upd.newState;
  const commit = encode(mlsMessageEncoder, upd.commit);

  const plaintext = "hello from ts-mls over X-Wing";
  const app = await createApplicationMessage({ context, state: aliceState, message: new TextEncoder().encode(plaintext) });
  aliceState = app.newState;

  // A KeyPackage for flow B, with its private part, so the consume step
  // can join the Go group with it.
  const bob = await keyPackage(impl, "did:key:ts-bob");

  writeJSON("tsmls-group.json", {
    versions: versions(),
    cipher_suite: XWING_SUITE,
    derive_key_pair: derive,
    key_package: hex(kpMessage(alice.publicPackage)),
    welcome: hex(welcome),
    ratchet_tree: hex(tree),
    after_add: afterAdd,
    commit: hex(commit),
    after_commit: { ...summary(aliceState), exporter: await exporter(aliceState, impl) },
    application_message: hex(encode(mlsMessageEncoder, app.message)),
    plaintext,
    consumed_go_key_package_sha256: sha256(unhex(readJSON("go-keypackage.json").key_package)),
  });
  writeJSON("tsmls-keypackage.json", {
    key_package: hex(kpMessage(bob.publicPackage)),
    private_key_package: hex(encode(privateKeyPackageEncoder, bob.privatePackage)),
  });
  console.log("produce: flow A written; epoch", aliceState.groupContext.epoch.toString());
}

// consume: flow B (the Go engine created a group, added the ts-mls
// KeyPackage, committed with a path and sent a message).
async function consume() {
  const impl = await xwingSuite();
  const context = { cipherSuite: impl, authService: unsafeTestingAuthenticationService };
  const go = readJSON("go-group.json");
  const mine = readJSON("tsmls-keypackage.json");
  const kp = decodeMessage(unhex(mine.key_package), wireformats.mls_key_package).keyPackage;
  const priv = decode(privateKeyPackageDecoder, unhex(mine.private_key_package));
  const { ratchetTreeDecoder } = await import(
    pathToFileURL(join(here, "node_modules", "ts-mls", "dist", "src", "ratchetTree.js")).href
  );

  const welcome = decodeMessage(unhex(go.welcome), wireformats.mls_welcome).welcome;
  let state = await joinGroup({
    context,
    welcome,
    keyPackage: kp,
    privateKeys: priv,
    ratchetTree: decode(ratchetTreeDecoder, unhex(go.ratchet_tree)),
  });
  const afterJoin = summary(state);

  const commitMsg = decodeMessage(unhex(go.commit), wireformats[go.commit_wireformat]);
  const r1 = await processMessage({ context, state, message: commitMsg });
  if (r1.kind !== "newState") throw new Error("commit did not give a new state");
  state = r1.newState;
  const afterCommit = { ...summary(state), exporter: await exporter(state, impl) };

  const appMsg = decodeMessage(unhex(go.application_message), wireformats.mls_private_message);
  const r2 = await processMessage({ context, state, message: appMsg });
  if (r2.kind !== "applicationMessage") throw new Error("application message not read");
  const plaintext = new TextDecoder().decode(r2.message);
  if (plaintext !== go.plaintext) throw new Error(`decrypted ${JSON.stringify(plaintext)}, want ${JSON.stringify(go.plaintext)}`);
  state = r2.newState;

  // A reply from ts-mls in the Go group, for the Go side to read.
  const reply = "ts-mls read the Go group";
  const app = await createApplicationMessage({ context, state, message: new TextEncoder().encode(reply) });

  writeJSON("tsmls-accepted.json", {
    versions: versions(),
    consumed_sha256: {
      welcome: sha256(unhex(go.welcome)),
      ratchet_tree: sha256(unhex(go.ratchet_tree)),
      commit: sha256(unhex(go.commit)),
      application_message: sha256(unhex(go.application_message)),
    },
    after_join: afterJoin,
    after_commit: afterCommit,
    decrypted: plaintext,
    reply: hex(encode(mlsMessageEncoder, app.message)),
    reply_plaintext: reply,
  });
  console.log("consume: joined at epoch", afterJoin.epoch, "processed commit to epoch", afterCommit.epoch, "read:", plaintext);
}

const step = process.argv[2];
if (step === "produce") await produce();
else if (step === "consume") await consume();
else {
  console.error("usage: node interop.mjs produce|consume");
  process.exit(2);
}
