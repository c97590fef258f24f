import type { ZodIssue } from 'zod';

/** ZodError's default for fields an object does not have; a schema may say it better (`.strict(message)`). */
const DEFAULT_UNKNOWN_KEYS = /^Unrecognized key\(s\) in object: /;

/**
 * Each issue as `field: message`, at most five. A field an object does not have, where its
 * schema says why in its own words (`.strict(message)`), is named itself:
 * `settings.lookup_as: not a setting of stripe syncs …`.
 */
export function issuesText(issues: ZodIssue[], what = 'body'): string {
  return issues
    .slice(0, 5)
    .flatMap((issue) => {
      const where = issue.path.length > 0 ? issue.path.join('.') : what;
      if (issue.code !== 'unrecognized_keys' || DEFAULT_UNKNOWN_KEYS.test(issue.message)) return [`${where}: ${issue.message}`];
      return issue.keys.map((key) => `${issue.path.length > 0 ? `${where}.` : ''}${key}: ${issue.message}`);
    })
    .join('; ');
}
