import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../config.ts';
import { newAdminToken, newSecretKey } from '../ids.ts';
import type { Logger } from '../log.ts';
import { SecretBox } from './secrets.ts';

export interface GeneratedFile {
  value: string;
  path: string;
  /** True when this start created the file. */
  created: boolean;
}

/**
 * Reads a one-line secret file from the data dir, creating it with mode 0600 on first
 * start. `flag: 'wx'` makes two processes starting at once agree on one value.
 */
async function readOrCreate(file: string, make: () => string): Promise<GeneratedFile> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    return { value: (await readFile(file, 'utf8')).trim(), path: file, created: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const value = make();
  try {
    await writeFile(file, `${value}\n`, { mode: 0o600, flag: 'wx' });
    return { value, path: file, created: true };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return { value: (await readFile(file, 'utf8')).trim(), path: file, created: false };
  }
}

export const secretKeyFile = (dataDir: string) => readOrCreate(path.join(dataDir, 'secret-key'), () => newSecretKey().toString('base64'));

export const adminTokenFile = (dataDir: string) => readOrCreate(path.join(dataDir, 'admin-token'), newAdminToken);

/** The secret key: TRIBUTARY_SECRET_KEY, else the data folder's, made on first start. */
export async function loadSecretBox(config: Config, logger: Logger): Promise<SecretBox> {
  if (config.secretKeyBase64) return SecretBox.fromBase64(config.secretKeyBase64);
  const file = await secretKeyFile(config.dataDir);
  if (file.created) logger.info({ file: file.path }, 'generated the secret key that encrypts upstream keys and passwords');
  return SecretBox.fromBase64(file.value);
}

/** The operator's token: TRIBUTARY_ADMIN_TOKEN, else the data folder's, made on first start. */
export async function loadAdminToken(config: Config, logger: Logger): Promise<string> {
  if (config.adminToken) return config.adminToken;
  const file = await adminTokenFile(config.dataDir);
  if (file.created) logger.info({ file: file.path }, 'generated the operator (admin) token; read it from this file');
  return file.value;
}
