import { randomBytes, randomInt } from 'node:crypto';

const lowerAlnum = 'abcdefghijklmnopqrstuvwxyz0123456789';
const alnum = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function randomFrom(alphabet: string, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[randomInt(alphabet.length)];
  return out;
}

/** Lowercase letters and digits only: safe in database names, role names and Kafka topics. */
export const randomLowerAlnum = (length: number) => randomFrom(lowerAlnum, length);

export const newAccountId = () => `acc_${randomLowerAlnum(14)}`;
export const newSyncId = () => `syn_${randomLowerAlnum(14)}`;
export const newServerId = () => `srv_${randomLowerAlnum(14)}`;
export const newBackfillId = () => `bf_${randomLowerAlnum(16)}`;
export const newDatabaseName = () => `tr_${randomLowerAlnum(16)}`;
/** 190 bits of entropy: long enough that a fast hash is a safe way to store it. */
export const newApiToken = () => `trb_${randomFrom(alnum, 32)}`;
export const newAdminToken = () => `tra_${randomFrom(alnum, 32)}`;
export const newPassword = () => randomFrom(alnum, 32);
export const newSecretKey = () => randomBytes(32);
